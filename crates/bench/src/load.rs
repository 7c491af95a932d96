//! Driving a running cluster: the gateway's host runs in this process with no Redis port, and
//! load tasks hand it commands. Closed loop: each client sends its next command when the last
//! one completes. Open loop: Poisson arrivals at a total rate, latency measured from the
//! intended send time (no coordinated omission), with a bound on operations in flight.

use crate::workload::Workload;
use hdrhistogram::Histogram;
use ordo_core::{CommandResult, Protocol};
use ordo_net::ClusterFile;
use ordo_net::host::{Host, HostError, Outcome, Request};
use ordo_net::metrics::Metrics;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// Most operations in flight in open loop (arrivals beyond it are counted as dropped).
pub const OPEN_LOOP_IN_FLIGHT_MAX: usize = 100_000;

/// One load point.
#[derive(Clone, Debug)]
pub struct Point {
    /// Closed-loop clients (ignored in open loop).
    pub clients: usize,
    /// Open-loop arrivals per second, total.
    pub rate: Option<f64>,
    /// How long to measure.
    pub duration: Duration,
    /// Warm-up before measuring.
    pub warmup: Duration,
}

/// What one point measured (`Deserialize` so that `results.json` can be read back).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PointResult {
    /// Protocol.
    pub protocol: String,
    /// Closed-loop clients.
    pub clients: usize,
    /// Offered rate (open loop).
    pub offered_per_s: Option<f64>,
    /// Completed operations per second.
    pub throughput_per_s: f64,
    /// Latency quantiles in µs: p50, p90, p99, p99.9, max.
    pub latency_us: [u64; 5],
    /// Operations whose result was an error.
    pub errors: u64,
    /// Operations answered as unknown (timeout).
    pub timeouts: u64,
    /// Open-loop arrivals dropped because too many were in flight.
    pub dropped: u64,
    /// The latency CDF: (latency µs, fraction at or below).
    pub cdf: Vec<(u64, f64)>,
}

struct Tally {
    histogram: Histogram<u64>,
    errors: u64,
    timeouts: u64,
    measuring: bool,
    completed_total: u64,
}

fn record(tally: &RefCell<Tally>, outcome: Outcome, latency: Duration) {
    let mut tally = tally.borrow_mut();
    tally.completed_total += 1;
    if !tally.measuring {
        return;
    }
    match outcome {
        Outcome::Done(CommandResult::Error(_)) | Outcome::Busy => tally.errors += 1,
        Outcome::Timeout => tally.timeouts += 1,
        Outcome::Done(_) => {
            let _ = tally.histogram.record(latency.as_micros().max(1) as u64);
        }
    }
}

/// Runs every point against the cluster `cluster` (its replicas already running), hosting the
/// gateway entry `gateway` here. `progress` gets one line per second.
pub fn run<P: Protocol>(
    cluster: &ClusterFile,
    gateway: &str,
    workload: &Workload,
    points: &[Point],
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<PointResult>, HostError> {
    let entry = cluster.entry(gateway)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| HostError::Io { what: "tokio runtime".into(), source })?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let metrics = Arc::new(Mutex::new(Metrics::default()));
        let host = Host::<P>::new(cluster, entry, metrics).await?;
        let (sender, receiver) = mpsc::channel::<Request>(cluster.runtime.gateway_queue_max.max(1));
        let host_task = tokio::task::spawn_local(host.run(Some(receiver)));
        let mut results = Vec::new();
        for point in points {
            results.push(run_point::<P>(sender.clone(), workload, point, progress).await);
        }
        drop(sender);
        host_task.abort();
        Ok(results)
    })
}

async fn run_point<P: Protocol>(
    sender: mpsc::Sender<Request>,
    workload: &Workload,
    point: &Point,
    progress: &mut dyn FnMut(&str),
) -> PointResult {
    let tally = Rc::new(RefCell::new(Tally {
        histogram: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
        errors: 0,
        timeouts: 0,
        measuring: false,
        completed_total: 0,
    }));
    let stop = Rc::new(RefCell::new(false));
    let dropped = Rc::new(RefCell::new(0u64));
    let tasks = match point.rate {
        None => spawn_closed_loop(&sender, workload, point.clients.max(1) as u64, &tally, &stop),
        Some(rate) => vec![spawn_open_loop(sender, workload, rate, &tally, &stop, &dropped)],
    };
    tokio::time::sleep(point.warmup).await;
    let (elapsed, histogram, errors, timeouts) = measure(&tally, point, progress).await;
    *stop.borrow_mut() = true;
    for task in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
    }
    let cdf = histogram.iter_quantiles(20).map(|v| (v.value_iterated_to(), v.quantile_iterated_to())).collect();
    PointResult {
        protocol: P::NAME.to_string(),
        clients: point.clients,
        offered_per_s: point.rate,
        throughput_per_s: histogram.len() as f64 / elapsed,
        latency_us: [
            histogram.value_at_quantile(0.5),
            histogram.value_at_quantile(0.9),
            histogram.value_at_quantile(0.99),
            histogram.value_at_quantile(0.999),
            histogram.max(),
        ],
        errors,
        timeouts,
        dropped: *dropped.borrow(),
        cdf,
    }
}

/// Closed loop: each client sends its next request when the previous one is answered.
fn spawn_closed_loop(
    sender: &mpsc::Sender<Request>,
    workload: &Workload,
    clients: u64,
    tally: &Rc<RefCell<Tally>>,
    stop: &Rc<RefCell<bool>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..clients)
        .map(|client| {
            let (sender, tally, stop, workload) = (sender.clone(), tally.clone(), stop.clone(), workload.clone());
            tokio::task::spawn_local(async move {
                let mut rng = ChaCha8Rng::seed_from_u64(client + 1);
                let mut n = 0;
                while !*stop.borrow() {
                    n += 1;
                    let (reply, receiver) = oneshot::channel();
                    let started = Instant::now();
                    if sender.send(Request { command: workload.next(&mut rng, client, n), reply }).await.is_err() {
                        return;
                    }
                    let outcome = receiver.await.unwrap_or(Outcome::Timeout);
                    record(&tally, outcome, started.elapsed());
                }
            })
        })
        .collect()
}

/// Open loop: Poisson arrivals at `rate` per second, latency counted from each intended start,
/// at most `OPEN_LOOP_IN_FLIGHT_MAX` in flight (arrivals past it are dropped and counted).
fn spawn_open_loop(
    sender: mpsc::Sender<Request>,
    workload: &Workload,
    rate: f64,
    tally: &Rc<RefCell<Tally>>,
    stop: &Rc<RefCell<bool>>,
    dropped: &Rc<RefCell<u64>>,
) -> tokio::task::JoinHandle<()> {
    let (tally, stop, workload, dropped) = (tally.clone(), stop.clone(), workload.clone(), dropped.clone());
    tokio::task::spawn_local(async move {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let gaps = Exp::new(rate.max(1e-3)).expect("positive rate");
        let in_flight = Rc::new(RefCell::new(0usize));
        let start = Instant::now();
        let mut next = 0.0f64;
        let mut n = 0;
        while !*stop.borrow() {
            next += gaps.sample(&mut rng);
            let intended = start + Duration::from_secs_f64(next);
            tokio::time::sleep_until(intended.into()).await;
            n += 1;
            if *in_flight.borrow() >= OPEN_LOOP_IN_FLIGHT_MAX {
                *dropped.borrow_mut() += 1;
                continue;
            }
            let (reply, receiver) = oneshot::channel();
            let request = Request { command: workload.next(&mut rng, n % 1_000, n), reply };
            if sender.try_send(request).is_err() {
                *dropped.borrow_mut() += 1;
                continue;
            }
            *in_flight.borrow_mut() += 1;
            let (tally, in_flight) = (tally.clone(), in_flight.clone());
            tokio::task::spawn_local(async move {
                let outcome = receiver.await.unwrap_or(Outcome::Timeout);
                record(&tally, outcome, intended.elapsed());
                *in_flight.borrow_mut() -= 1;
            });
        }
    })
}

/// Measures for the point's duration, printing progress each second; returns the seconds
/// measured and the tally (histogram, errors, timeouts) at the end.
async fn measure(
    tally: &Rc<RefCell<Tally>>,
    point: &Point,
    progress: &mut dyn FnMut(&str),
) -> (f64, Histogram<u64>, u64, u64) {
    tally.borrow_mut().measuring = true;
    let measured_from = Instant::now();
    let mut last = (Instant::now(), tally.borrow().completed_total);
    while measured_from.elapsed() < point.duration {
        tokio::time::sleep(Duration::from_secs(1).min(point.duration)).await;
        let (done, p50, p99) = {
            let t = tally.borrow();
            (t.completed_total, t.histogram.value_at_quantile(0.5), t.histogram.value_at_quantile(0.99))
        };
        let rate = (done - last.1) as f64 / last.0.elapsed().as_secs_f64();
        last = (Instant::now(), done);
        progress(&format!(
            "  {:>5.1}s/{:.0}s  {:>9.0} ops/s  p50 {:>6} us  p99 {:>7} us",
            measured_from.elapsed().as_secs_f64(),
            point.duration.as_secs_f64(),
            rate,
            p50,
            p99
        ));
    }
    let elapsed = measured_from.elapsed().as_secs_f64();
    let mut t = tally.borrow_mut();
    t.measuring = false;
    (elapsed, t.histogram.clone(), t.errors, t.timeouts)
}
