//! What the probe examples (`gemv_probe`, `dispatch_probe`, `coop_probe`) share: a
//! runtime whose device writes timestamps, one compute pass per timing,
//! with a timestamp at its start and end, and the readback of those
//! timestamps as seconds.

/// The default runtime, or an exit (status 1, naming `probe`) when there is
/// no GPU or it has no timestamps.
pub fn runtime_with_timestamps(probe: &str) -> etwgpu_runtime::Runtime {
    let rt = match etwgpu_runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{probe}: no GPU: {e}");
            std::process::exit(1)
        }
    };
    if !rt.device().features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        eprintln!("{probe}: the device has no timestamps");
        std::process::exit(1)
    }
    rt
}

/// A query set for `passes` passes: a begin and an end timestamp each.
pub fn pass_queries(device: &wgpu::Device, passes: u32) -> wgpu::QuerySet {
    device.create_query_set(&wgpu::QuerySetDescriptor {
        label: None,
        ty: wgpu::QueryType::Timestamp,
        count: 2 * passes,
    })
}

/// The timestamp writes of pass `pass` into `queries`.
pub fn pass_timestamps(queries: &wgpu::QuerySet, pass: u32) -> wgpu::ComputePassTimestampWrites<'_> {
    wgpu::ComputePassTimestampWrites {
        query_set: queries,
        beginning_of_pass_write_index: Some(2 * pass),
        end_of_pass_write_index: Some(2 * pass + 1),
    }
}

/// Resolves the `passes` passes' timestamps that `encoder` wrote into
/// `queries`, submits it, waits, and gives the median pass time in seconds,
/// the first pass (a warm-up) left out.
pub fn median_pass_seconds(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    encoder: wgpu::CommandEncoder,
    queries: &wgpu::QuerySet,
    passes: u32,
) -> f64 {
    let mut times = pass_seconds(device, queue, encoder, queries, passes).split_off(1);
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Resolves the `passes` passes' timestamps that `encoder` wrote into
/// `queries`, submits it, waits, and gives each pass's time in seconds, in
/// pass order.
pub fn pass_seconds(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    mut encoder: wgpu::CommandEncoder,
    queries: &wgpu::QuerySet,
    passes: u32,
) -> Vec<f64> {
    let size = 16 * u64::from(passes);
    let resolve = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size,
        usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let read = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    encoder.resolve_query_set(queries, 0..2 * passes, &resolve, 0);
    encoder.copy_buffer_to_buffer(&resolve, 0, &read, 0, size);
    queue.submit([encoder.finish()]);
    read.slice(..).map_async(wgpu::MapMode::Read, |_| {});
    let _ = device.poll(wgpu::PollType::wait_indefinitely());
    let view = read.slice(..).get_mapped_range().expect("mapped");
    let period = f64::from(queue.get_timestamp_period());
    let ticks: Vec<u64> = view.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8"))).collect();
    ticks.chunks_exact(2).map(|t| t[1].saturating_sub(t[0]) as f64 * period * 1e-9).collect()
}
