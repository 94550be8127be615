//! `xlat-probe`: measure the real machine's address translation.
pub mod backend;
pub mod chase;
pub mod cpuid;
pub mod error;
pub mod mem;
pub mod osbench;
pub mod perf;
pub mod rdtsc;
pub mod rng;
pub mod stats;
pub mod timer;
pub mod knees;
