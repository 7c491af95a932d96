//! Scripted scenario tests (STYLE rule 14): to be written.
