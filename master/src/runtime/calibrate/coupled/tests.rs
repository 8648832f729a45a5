//! The coupled probe through a real worker: the window of chunks it holds.

use super::*;

/// A worker computing far slower than its link (loopback; products of
/// 64×64 at 300× this machine's time): with every chunk sent at once,
/// arrivals would run ahead of the results by the whole pipeline; a
/// chunk goes only once the one `held` before it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_holds_at_most_its_window_of_chunks() {
    use crate::runtime::local::{start_measured, Emulated};
    let spec = Emulated {
        name: "w".into(),
        link_rate: None,
        slowdown: 300.0,
        speed_change: None,
        memory: None,
    };
    let workers = start_measured(&[spec], 64).await.expect("a local worker");
    let address = workers.cluster.worker[0].address.clone();
    let mut link = crate::runtime::link::connect("w", &address, None, Default::default())
        .await
        .expect("connects");
    let opts = super::CalibrateOptions::for_form(dls_protocol::Form::square(64));
    // Chunks of 2 (at most 8 units held: four chunks), sixteen of them.
    let alone = Alone {
        c: 0.005,
        w: 0.005,
        d: 0.002,
        ret_latency: 0.0,
        room: 8,
        largest: 16,
    };
    let (k, n, held) = (units(&alone), chunks(&alone, 2), window(&alone, 2));
    assert_eq!((k, n, held), (2, Some(TUNING.chunks), TUNING.window));
    let p = tokio::time::timeout(std::time::Duration::from_secs(60), measure(&mut link, &alone, &opts))
        .await
        .expect("within a minute")
        .expect("measured")
        .expect("a pipeline");
    workers.stop().await;
    assert_eq!(p.back.len(), TUNING.chunks as usize);
    assert!(p.back.iter().all(|t| t.is_finite()), "every chunk came back: {p:?}");
    let held = held as usize;
    for j in held..p.back.len() {
        assert!(
            p.received[j] > p.back[j - held],
            "chunk {j} arrived at {} before chunk {} was back at {}",
            p.received[j],
            j - held,
            p.back[j - held]
        );
    }
    // Computing set the pace, not the window: the steady state is the
    // worker's chunks computed back to back.
    let computing = p.computing().expect("sixteen chunks") * 2.0;
    let cycle = p.cycle().expect("sixteen chunks") * 2.0;
    assert!(
        cycle < 1.5 * computing,
        "cycle {cycle} s a chunk, computing {computing}"
    );
}
