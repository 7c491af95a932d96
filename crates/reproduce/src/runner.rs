//! Runs every simulation of a paper on `jobs` threads, longest first, and says how far it is:
//! which experiment and run just finished, how many are done, and about how long is left.

use crate::experiment::{Paper, Run};
use crate::measure::{Measured, measure};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Measures every run of `paper`: `result[e][r]` is run `r` of experiment `e`.
pub fn run_all(
    paper: &Paper,
    jobs: usize,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<Vec<Vec<Measured>>, String> {
    let mut order: Vec<(usize, usize)> = (paper.experiments.iter().enumerate())
        .flat_map(|(e, experiment)| (0..experiment.runs.len()).map(move |r| (e, r)))
        .collect();
    let run = |&(e, r): &(usize, usize)| &paper.experiments[e].runs[r];
    order.sort_by(|a, b| cost(run(b)).total_cmp(&cost(run(a))));
    let total_cost: f64 = order.iter().map(|at| cost(run(at))).sum();
    let slots: Vec<Vec<Slot>> =
        paper.experiments.iter().map(|e| e.runs.iter().map(|_| Mutex::new(None)).collect()).collect();
    let next = AtomicUsize::new(0);
    let tracker = Mutex::new(Tracker { started: Instant::now(), done: 0, done_cost: 0.0, progress });
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                while let Some(at) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let started = Instant::now();
                    let measured =
                        measure(run(at)).map_err(|e| format!("{} {}: {e}", paper.experiments[at.0].id, run(at).id));
                    *slots[at.0][at.1].lock().expect("no thread panics holding it") = Some(measured);
                    let mut tracker = tracker.lock().expect("no thread panics holding it");
                    tracker.finished(paper, *at, started.elapsed(), cost(run(at)), total_cost, order.len());
                }
            });
        }
    });
    slots
        .into_iter()
        .map(|runs| {
            runs.into_iter().map(|slot| slot.into_inner().expect("no poisoning").expect("every run ran")).collect()
        })
        .collect()
}

/// Where a worker leaves one run's measurement.
type Slot = Mutex<Option<Result<Measured, String>>>;

struct Tracker<'a> {
    started: Instant,
    done: usize,
    done_cost: f64,
    progress: &'a mut (dyn FnMut(&str) + Send),
}

impl Tracker<'_> {
    fn finished(
        &mut self,
        paper: &Paper,
        (e, r): (usize, usize),
        took: Duration,
        cost: f64,
        total_cost: f64,
        total: usize,
    ) {
        self.done += 1;
        self.done_cost += cost;
        let elapsed = self.started.elapsed().as_secs_f64();
        let left = elapsed * (total_cost - self.done_cost).max(0.0) / self.done_cost.max(1e-9);
        let experiment = &paper.experiments[e];
        let line = format!(
            "[{}] {}/{} runs · {} {} ({}) {:.1} s · elapsed {} · about {} left",
            paper.name,
            self.done,
            total,
            experiment.id,
            experiment.runs[r].id,
            experiment.figures,
            took.as_secs_f64(),
            clock(elapsed),
            clock(left)
        );
        (self.progress)(&line);
    }
}

fn clock(seconds: f64) -> String {
    let seconds = seconds.round() as u64;
    format!("{}:{:02}", seconds / 60, seconds % 60)
}

/// A guess of a run's wall time, proportional to the messages it simulates: operations times
/// nodes. Only the progress estimate and the order (longest first) use it.
fn cost(run: &Run) -> f64 {
    let config = &run.config;
    let seconds = config.duration_ns as f64 / 1e9;
    let wan = config.latency.sites.len() > 1 && config.latency.one_way_ns.iter().flatten().any(|&ns| ns > 10_000_000);
    // A closed-loop WAN client does a few operations a second, but each costs the simulator far
    // more than a LAN one (measured: Tempo on five regions, about 30 times as much wall time
    // per operation), so it weighs as 250 LAN operations a second.
    let per_client = config.workload.rate_per_client.unwrap_or(if wan { 250.0 } else { 2_000.0 });
    seconds * per_client * config.clients as f64 * (config.replicas * config.shards.max(1)) as f64
}
