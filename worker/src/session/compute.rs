//! The compute thread's side of a session: one piece of work (a chunk,
//! a probe, a panel of a piece) computed, with the emulated slowdown.

use super::panel::add_panel;
use super::{Done, Key, Work};
use crate::config::Reference;
use crate::kernel;
use dls_protocol::Values;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tracing::debug;

/// Compute (`work_factor` times over, emulating a slower processor), then
/// (emulation) wait `wait_units` times one product's reference time
/// (`Reference`). The time reported is the kernel's plus the wait; a
/// probe's random inputs are not counted.
pub(super) fn compute(
    kernel: &kernel::Kernel,
    reference: &Reference,
    accs: &mut HashMap<Key, Values>,
    work: Work,
    wait_units: f64,
    work_factor: u32,
) -> Done {
    let form = match &work {
        Work::Chunk { form, .. } | Work::Probe { form, .. } | Work::Panel { form, .. } => *form,
        Work::Drop(job) => {
            accs.retain(|k, _| k.0 != *job);
            return Done::Dropped;
        }
    };
    let wait = match &work {
        _ if wait_units <= 0.0 => 0.0,
        Work::Panel { .. } => wait_units * reference.seconds_per_flop(kernel, form.dtype) * form.shape.flops(),
        _ => wait_units * reference.seconds_per_product(kernel, &form),
    };
    let t0 = Instant::now();
    let mut done = match work {
        Work::Chunk {
            key,
            form,
            count,
            inputs,
            shared_b,
        } => {
            debug!(job = key.0 .0, chunk = key.1 .0, "computing");
            let c = kernel.multiply_form(&form, count as usize, &inputs, shared_b.as_deref(), work_factor);
            let secs = t0.elapsed().as_secs_f64();
            // The inputs, already mapped, take the next chunk's results.
            kernel.recycle(inputs);
            Done::Chunk {
                key,
                form,
                count,
                c,
                secs,
            }
        }
        Work::Probe { form, count } => Done::Probe {
            count,
            secs: kernel::time_batch(kernel, &form, count as usize, work_factor),
        },
        Work::Panel {
            key,
            form,
            depth,
            first,
            last,
            inputs,
        } => {
            let c = add_panel(kernel, accs, key, form, depth, first, last, &inputs, work_factor);
            let secs = t0.elapsed().as_secs_f64();
            // Its memory, already mapped, takes a later panel.
            kernel.recycle(inputs);
            Done::Panel { key, form, c, secs }
        }
        Work::Drop(_) => Done::Dropped,
    };
    if wait > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(wait));
    }
    match &mut done {
        Done::Chunk { secs, .. } | Done::Panel { secs, .. } => *secs += wait,
        Done::Dropped => {}
        Done::Probe { secs, .. } => {
            if let Ok(s) = secs {
                *s += wait
            }
        }
    }
    done
}
