//! NumPy `.npy` files of f64 matrices, shape (M, n, n) — the batch inputs
//! A, B (little- or big-endian, C or Fortran order, converted on reading)
//! and the output C (little-endian, C order). Only what the runtime needs: a
//! reader that names every mismatch and a writer.

use crate::runtime::batch::Batch;
use anyhow::{bail, Context, Result};
use std::io::{Read, Seek, Write};
use std::path::Path;
use std::sync::Arc;

const MAGIC: &[u8] = b"\x93NUMPY";

/// A batch of `m` square matrices of size `n`, row-major, back to back.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrices {
    pub m: usize,
    pub n: usize,
    pub data: Vec<f64>,
}

fn field<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header.find(&format!("'{key}'"))?;
    let rest = header[at + key.len() + 2..].trim_start();
    rest.strip_prefix(':').map(str::trim_start)
}

/// How the values of a file are laid out: byte order and axis order.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Order {
    /// Big-endian float64 ('>f8').
    pub big_endian: bool,
    /// Fortran (column-major) order over the whole array.
    pub fortran: bool,
}

fn parse_header(header: &str, origin: &str) -> Result<(Vec<usize>, Order)> {
    let descr = field(header, "descr").with_context(|| format!("{origin}: header has no 'descr'"))?;
    let descr = descr.split(['\'', '"']).nth(1).unwrap_or("");
    let big_endian = match descr {
        "<f8" => false,
        ">f8" => true,
        "=f8" => cfg!(target_endian = "big"),
        _ => bail!("{origin}: dtype {descr:?} is not float64 ('<f8' or '>f8'); convert with numpy: a.astype('<f8')"),
    };
    let fortran = field(header, "fortran_order").with_context(|| format!("{origin}: header has no 'fortran_order'"))?;
    let fortran = match fortran {
        f if f.starts_with("True") => true,
        f if f.starts_with("False") => false,
        f => bail!(
            "{origin}: unreadable fortran_order {:?}",
            f.chars().take(8).collect::<String>()
        ),
    };
    let shape = field(header, "shape").with_context(|| format!("{origin}: header has no 'shape'"))?;
    let inner = shape
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .with_context(|| format!("{origin}: unreadable shape {shape:?}"))?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .with_context(|| format!("{origin}: unreadable shape entry {s:?}"))
        })
        .collect::<Result<Vec<usize>>>()
        .map(|shape| (shape, Order { big_endian, fortran }))
}

/// Where a `.npy` file's matrices are: `m` of size `n` from byte `prefix`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Layout {
    pub m: usize,
    pub n: usize,
    pub prefix: u64,
    pub order: Order,
}

/// Bytes of the magic, version and header length of a version 1 file.
const MIN_PREFIX: usize = 10;

/// The layout of a `.npy` file of `file_len` bytes that starts with `head`
/// (at least its magic, version, header length and header; more is
/// ignored). Pure and total: any bytes give a layout or an error naming
/// `origin`, and a layout is given only when the file holds exactly the
/// values its shape says. `n`, when given, must match (it is `--size`).
pub fn layout(head: &[u8], file_len: u64, n: Option<usize>, origin: &str) -> Result<Layout> {
    if head.len() < MIN_PREFIX {
        bail!("{origin}: too short to be a .npy file");
    }
    if &head[..6] != MAGIC {
        bail!("{origin}: not a .npy file (bad magic)");
    }
    let (len_bytes, header_len) = match head[6] {
        1 => (2, u16::from_le_bytes([head[8], head[9]]) as usize),
        2 | 3 if head.len() >= 12 => (4, u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize),
        2 | 3 => bail!("{origin}: truncated header"),
        v => bail!("{origin}: unsupported .npy version {v}"),
    };
    if header_len > MAX_HEADER {
        bail!("{origin}: header of {header_len} bytes is not plausible");
    }
    let start = 8 + len_bytes;
    let header = head
        .get(start..start + header_len)
        .with_context(|| format!("{origin}: truncated header"))?;
    let header = String::from_utf8_lossy(header);
    let (shape, order) = parse_header(&header, origin)?;
    if shape.len() != 3 {
        bail!(
            "{origin}: shape {shape:?} has rank {}, expected 3: (M, n, n)",
            shape.len()
        );
    }
    let (m, rows, cols) = (shape[0], shape[1], shape[2]);
    if rows != cols {
        bail!("{origin}: matrices of shape {rows}×{cols} are not square");
    }
    if let Some(n) = n {
        if rows != n {
            bail!("{origin}: matrices are {rows}×{rows}, but --size is {n}");
        }
    }
    // The shape is checked against the file's size before anything is
    // allocated: a header can claim any shape.
    let count = m
        .checked_mul(rows)
        .and_then(|x| x.checked_mul(rows))
        .filter(|&c| c.checked_mul(8).is_some())
        .with_context(|| format!("{origin}: shape {shape:?} is too large"))?;
    let prefix = (start + header_len) as u64;
    if file_len < prefix {
        bail!("{origin}: truncated header");
    }
    let values = (file_len - prefix) / 8;
    if (count as u64) > values {
        bail!(
            "{origin}: holds fewer values than its shape {shape:?} says ({values} of {count}; is the file truncated?)"
        );
    }
    if (count as u64) < values || !(file_len - prefix).is_multiple_of(8) {
        bail!("{origin}: holds more bytes than its shape {shape:?} says");
    }
    Ok(Layout {
        m,
        n: rows,
        prefix,
        order,
    })
}

/// Values as read from a file (raw bytes in each slot) to this machine's
/// float64s.
fn to_host(data: &mut [f64], big_endian: bool) {
    for v in data {
        let raw = v.to_ne_bytes();
        *v = if big_endian {
            f64::from_be_bytes(raw)
        } else {
            f64::from_le_bytes(raw)
        };
    }
}

/// An (m, n, n) array in Fortran order (element (i, r, c) at
/// i + m·(r + n·c)) in C order (at (i·n + r)·n + c). Holds a second copy
/// while it reorders.
pub fn from_fortran(data: &[f64], m: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; data.len()];
    for c in 0..n {
        for r in 0..n {
            let src = m * (r + n * c);
            for i in 0..m {
                out[(i * n + r) * n + c] = data[src + i];
            }
        }
    }
    out
}

/// The longest header believed.
const MAX_HEADER: usize = 1 << 20;

/// Read a (M, n, n) float64 array. `n`, when given, must match.
pub fn read(path: &Path, n: Option<usize>) -> Result<Matrices> {
    let origin = path.display().to_string();
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {origin}"))?;
    let file_len = f.metadata().with_context(|| format!("reading {origin}"))?.len();
    // The prefix and the header, at most: what `layout` needs.
    let mut head = Vec::new();
    (&mut f)
        .take((12 + MAX_HEADER) as u64)
        .read_to_end(&mut head)
        .with_context(|| format!("reading {origin}"))?;
    let Layout {
        m,
        n: rows,
        prefix,
        order,
    } = layout(&head, file_len, n, &origin)?;
    let count = m * rows * rows;
    f.seek(std::io::SeekFrom::Start(prefix))
        .with_context(|| format!("reading {origin}"))?;
    // A, B and C are held together.
    crate::runtime::batch::check_fits(m, rows, crate::runtime::batch::available_memory(), &origin)?;
    let mut data = Vec::new();
    data.try_reserve_exact(count)
        .map_err(|_| anyhow::anyhow!("{origin}: not enough memory for {count} values"))?;
    data.resize(count, 0.0f64);
    f.read_exact(bytemuck::cast_slice_mut(&mut data))
        .with_context(|| format!("{origin}: holds fewer values than its shape ({m}, {rows}, {rows}) says"))?;
    to_host(&mut data, order.big_endian);
    if order.fortran {
        data = from_fortran(&data, m, rows);
    }
    Ok(Matrices { m, n: rows, data })
}

/// Write a (M, n, n) float64 array (format version 1.0).
pub fn write(path: &Path, mats: &Matrices) -> Result<()> {
    let origin = path.display().to_string();
    let mut header = format!(
        "{{'descr': '<f8', 'fortran_order': False, 'shape': ({}, {}, {}), }}",
        mats.m, mats.n, mats.n
    );
    // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    crate::output::atomic_write(path, |f| {
        f.write_all(MAGIC)?;
        f.write_all(&[1, 0])?;
        f.write_all(&(header.len() as u16).to_le_bytes())?;
        f.write_all(header.as_bytes())?;
        f.write_all(&dls_protocol::frame::payload_bytes(&mats.data))
    })
    .with_context(|| format!("writing {origin}"))
}

/// A batch from two `.npy` files of shape (M, n, n), float64: A and B.
pub fn read_batch(a: &Path, b: &Path, n: Option<usize>) -> Result<Batch> {
    let ma = read(a, n)?;
    let mb = read(b, n)?;
    if ma.n != mb.n {
        bail!(
            "{} holds {n}×{n} matrices but {} holds {}×{}: A and B must have the same size",
            b.display(),
            a.display(),
            ma.n,
            ma.n,
            n = mb.n
        );
    }
    if ma.m != mb.m {
        bail!(
            "{} holds {} matrices but {} holds {}: A and B must pair up",
            a.display(),
            ma.m,
            b.display(),
            mb.m
        );
    }
    Ok(Batch {
        n: ma.n,
        m: ma.m,
        a: Arc::new(ma.data),
        b: Arc::new(mb.data),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("dls-npy-{}-{name}", std::process::id()))
    }

    /// Magic, version 1 and `header` padded as numpy pads it.
    fn head(header: &str) -> Vec<u8> {
        let mut h = header.to_string();
        let total = 10 + h.len() + 1;
        h.push_str(&" ".repeat((64 - total % 64) % 64));
        h.push('\n');
        let mut bytes = MAGIC.to_vec();
        bytes.extend([1, 0]);
        bytes.extend((h.len() as u16).to_le_bytes());
        bytes.extend(h.as_bytes());
        bytes
    }

    fn raw(path: &Path, header: &str, values: usize) {
        let mut bytes = head(header);
        bytes.extend(vec![0u8; values * 8]);
        std::fs::write(path, bytes).expect("writes");
    }

    /// A file of (m, n, n) whose element (i, r, c) is 100i + 10r + c + ½,
    /// laid out as `descr` and `fortran` say, written byte by byte here.
    fn laid_out(path: &Path, m: usize, n: usize, descr: &str, fortran: bool) {
        let value = |i: usize, r: usize, c: usize| (100 * i + 10 * r + c) as f64 + 0.5;
        let mut bytes = head(&format!(
            "{{'descr': '{descr}', 'fortran_order': {}, 'shape': ({m}, {n}, {n}), }}",
            if fortran { "True" } else { "False" }
        ));
        // Fortran order: the first index varies fastest.
        let mut order = Vec::new();
        if fortran {
            for c in 0..n {
                for r in 0..n {
                    for i in 0..m {
                        order.push((i, r, c));
                    }
                }
            }
        } else {
            for i in 0..m {
                for r in 0..n {
                    for c in 0..n {
                        order.push((i, r, c));
                    }
                }
            }
        }
        for (i, r, c) in order {
            let v = value(i, r, c);
            bytes.extend(if descr.starts_with('>') {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            });
        }
        std::fs::write(path, bytes).expect("writes");
    }

    #[test]
    fn fortran_order_and_big_endian_files_are_converted_on_reading() {
        let (m, n) = (3, 4);
        let want: Vec<f64> = (0..m)
            .flat_map(|i| (0..n).flat_map(move |r| (0..n).map(move |c| (100 * i + 10 * r + c) as f64 + 0.5)))
            .collect();
        for (descr, fortran) in [("<f8", false), ("<f8", true), (">f8", false), (">f8", true)] {
            let endian = if descr.starts_with('>') { "be" } else { "le" };
            let p = tmp(&format!("layout-{endian}-{fortran}.npy"));
            laid_out(&p, m, n, descr, fortran);
            let got = read(&p, None).unwrap_or_else(|e| panic!("{descr} fortran={fortran}: {e:#}"));
            assert_eq!((got.m, got.n), (m, n));
            assert_eq!(got.data, want, "{descr} fortran={fortran}");
            let _ = std::fs::remove_file(p);
        }
        // Other dtypes are still refused by name.
        let p = tmp("f4.npy");
        raw(&p, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 2), }", 2);
        let e = format!("{:#}", read(&p, None).expect_err("float32"));
        assert!(e.contains("'<f4'") || e.contains("\"<f4\""), "{e}");
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn a_and_b_of_different_sizes_name_both_files() {
        let (a, b) = (tmp("size-a.npy"), tmp("size-b.npy"));
        raw(&a, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 4, 4), }", 32);
        raw(&b, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3, 3), }", 18);
        let e = format!("{:#}", read_batch(&a, &b, None).expect_err("sizes differ"));
        assert!(e.contains("3×3") && e.contains("4×4") && e.contains("same size"), "{e}");
        assert!(!e.contains("--size"), "{e}");
        let e = format!("{:#}", read_batch(&a, &b, Some(4)).expect_err("B is not 4"));
        assert!(e.contains("size-b.npy") && e.contains("--size is 4"), "{e}");
        let _ = (std::fs::remove_file(a), std::fs::remove_file(b));
    }

    #[test]
    fn roundtrip() {
        let p = tmp("rt.npy");
        let m = Matrices {
            m: 3,
            n: 2,
            data: (0..12).map(|i| i as f64 * 0.25).collect(),
        };
        write(&p, &m).expect("writes");
        let bytes = std::fs::read(&p).expect("reads");
        let header_end = 10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!(header_end % 64, 0, "header padded to 64 bytes as numpy does");
        assert_eq!(read(&p, Some(2)).expect("reads"), m);
        let _ = std::fs::remove_file(p);
    }

    fn fails(header: &str, values: usize, n: Option<usize>, needle: &str) {
        let p = tmp(&format!("bad-{}.npy", needle.len()));
        raw(&p, header, values);
        let e = format!("{:#}", read(&p, n).expect_err("must fail"));
        let _ = std::fs::remove_file(&p);
        assert!(e.contains(needle), "{e:?} should mention {needle:?}");
    }

    #[test]
    fn mismatches_are_named() {
        fails(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 2), }",
            2,
            None,
            "not float64",
        );
        fails(
            "{'descr': '<f8', 'fortran_order': Maybe, 'shape': (1, 2, 2), }",
            4,
            None,
            "unreadable fortran_order",
        );
        fails(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (4, 4), }",
            16,
            None,
            "rank 2",
        );
        fails(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2, 3), }",
            6,
            None,
            "not square",
        );
        fails(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2, 2), }",
            4,
            Some(3),
            "--size is 3",
        );
        fails(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2, 2), }",
            5,
            None,
            "fewer values",
        );
        fails(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2, 2), }",
            5,
            None,
            "more bytes",
        );
        // Shapes a header may claim, checked before anything is allocated:
        // far more than the file holds, and more than can be counted.
        fails(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (2000000, 2560, 2560), }",
            4,
            None,
            "fewer values",
        );
        fails(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952, 1, 1), }",
            4,
            None,
            "too large",
        );
        fails(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 4294967296, 4294967296), }",
            4,
            None,
            "too large",
        );
        let p = tmp("junk.npy");
        std::fs::write(&p, b"hello world").expect("writes");
        assert!(format!("{:#}", read(&p, None).expect_err("fails")).contains("not a .npy"));
        let _ = std::fs::remove_file(p);
    }
}
