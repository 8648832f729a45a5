//! `dls experiment` against a cluster of worker daemons: rows labelled and
//! appended, replotted, and refused where the labels do not fit.

mod common;
use common::cli::{dls, s, tmp};

/// A test bed is rebuilt for every random platform, so its results are
/// gathered by labelled runs with --append: the rows must pile up, numbered
/// on, with their labels, and the tables must cover all of them.
#[test]
fn experiments_on_a_cluster_append_labelled_rows() {
    let w = common::start(
        &[(Some(200.0), 2.0), (None, 1.0), (Some(100.0), 3.0)],
        Some("tok-0123456789abcdef"),
    );
    let list = w.list();
    let out = tmp("experiments-append");
    let _ = std::fs::remove_dir_all(&out);
    let base = [
        "--workers",
        &list,
        "--size",
        "16",
        "--batch",
        "24",
        "--platforms",
        "1",
        "--out",
        s(&out),
        "--append",
    ];
    for speeds in ["1:2,3:4,5:6", "2:2,2:2,2:2"] {
        let mut args = vec!["experiment", "baselines", "--speeds", speeds];
        args.extend_from_slice(&base);
        let (ok, _, err) = dls(&args, Some("tok-0123456789abcdef"));
        assert!(ok, "{err}");
        let mut args = vec![
            "experiment",
            "heuristics",
            "--family",
            "heterogeneous-star",
            "--speeds",
            speeds,
        ];
        args.extend_from_slice(&base);
        let (ok, table, err) = dls(&args, Some("tok-0123456789abcdef"));
        assert!(ok, "{err}");
        assert!(table.contains("heterogeneous-star"), "{table}");
    }
    let json = |kind: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(out.join(format!("{kind}.json"))).expect("json written");
        serde_json::from_str(&text).expect("valid json")
    };
    let b = json("baselines");
    let b = b.as_array().expect("rows");
    let methods = common::BASELINE_METHODS;
    assert_eq!(b.len(), 2 * methods.len(), "two platforms of every method");
    for (k, r) in b.iter().enumerate() {
        assert_eq!(r["platform"].as_u64(), Some((k / methods.len()) as u64));
        assert_eq!(r["method"], methods[k % methods.len()]);
        // The three on-demand methods (last) have no prediction: written as
        // null, read back as such.
        assert_eq!(r["predicted"].is_null(), k % methods.len() >= methods.len() - 3, "{r}");
    }
    assert_eq!(b[methods.len()]["speeds"][0][0].as_f64(), Some(2.0));
    let h = json("heuristics");
    let h = h.as_array().expect("rows");
    assert_eq!(h.len(), 8, "two platforms of four strategies");
    assert!(h.iter().all(|r| r["family"] == "heterogeneous-star"));
    assert_eq!(h[7]["platform"].as_u64(), Some(1));
    assert_eq!(h[0]["speeds"][2][1].as_f64(), Some(6.0));
    let csv = std::fs::read_to_string(out.join("baselines.csv")).expect("csv");
    assert_eq!(csv.lines().count(), 2 * methods.len() + 1, "{csv}");
    // --replot writes the outputs again from the stored rows, running nothing.
    std::fs::remove_file(out.join("baselines.csv")).expect("removes");
    let (ok, table, err) = dls(&["experiment", "baselines", "--replot", "--out", s(&out)], None);
    assert!(ok, "{err}");
    assert_eq!(
        std::fs::read_to_string(out.join("baselines.csv")).expect("csv again"),
        csv
    );
    assert_eq!(
        table.lines().filter(|l| l.contains("self-scheduling")).count(),
        3,
        "{table}"
    );
    let empty = tmp("experiments-none");
    let (ok, _, err) = dls(&["experiment", "heuristics", "--replot", "--out", s(&empty)], None);
    assert!(!ok && err.contains("--replot: no rows in"), "{err}");

    // Labels that do not fit the cluster, or without a cluster, are refused.
    let (ok, _, err) = dls(
        &[
            "experiment",
            "baselines",
            "--workers",
            &list,
            "--speeds",
            "1:2",
            "--out",
            s(&out),
        ],
        Some("tok-0123456789abcdef"),
    );
    assert!(
        !ok && err.contains("--speeds gives 1 workers but the cluster has 3"),
        "{err}"
    );
    let (ok, _, err) = dls(&["experiment", "participation", "--x", "3", "--out", s(&out)], None);
    assert!(!ok && err.contains("give --cluster or --workers"), "{err}");
    let (ok, _, err) = dls(
        &[
            "experiment",
            "participation",
            "--workers",
            &list,
            "--x",
            "3",
            "--out",
            s(&out),
        ],
        Some("tok-0123456789abcdef"),
    );
    assert!(!ok && err.contains("needs the 4 workers P1..P4"), "{err}");
}

/// The paper's assessment of one product on a small emulated star: the
/// four rows, the two ratios, and the files; refused on a cluster.
#[test]
fn the_product_assessment_compares_both_stars() {
    let out = tmp("experiments-product");
    let _ = std::fs::remove_dir_all(&out);
    let (ok, table, err) = dls(
        &[
            "experiment",
            "product",
            "--size",
            "96",
            "--speeds",
            "10:4,10:2,10:1",
            "--out",
            s(&out),
        ],
        None,
    );
    assert!(ok, "{err}");
    assert!(table.contains("faster than the homogeneous one"), "{table}");
    assert!(table.contains("equivalent homogeneous star"), "{table}");
    let rows: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("product.json")).expect("rows")).expect("JSON");
    let rows = rows.as_array().expect("an array");
    assert_eq!(rows.len(), 4);
    let eq: Vec<_> = rows.iter().filter(|r| r["star"] == "equivalent homogeneous").collect();
    assert_eq!(eq.len(), 1);
    // The equivalent star: three workers of the average speed.
    assert_eq!(
        eq[0]["speeds"],
        "10:2.3333333333333335 10:2.3333333333333335 10:2.3333333333333335"
    );
    for r in rows {
        assert!(r["measured"].as_f64().expect("a time") > 0.0);
        assert!(r["partition_over_lower"].as_f64().expect("a ratio") >= 1.0 - 1e-9);
    }
    assert!(out.join("product.csv").exists() && out.join("product.svg").exists());
    let (ok, _, err) = dls(
        &["experiment", "product", "--workers", "127.0.0.1:9", "--out", s(&out)],
        None,
    );
    assert!(!ok && err.contains("local workers only"), "{err}");
}
