//! A small step-by-step cluster for scenario tests (being written).
