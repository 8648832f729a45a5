//! NumPy `.npy` files of float32 or float64 matrices: a batch's A of shape
//! (M, n, k), its B of shape (M, k, m) or one (k, m) shared by every
//! product, and the output C of shape (M, n, m). Inputs may be little- or
//! big-endian, C or Fortran order (converted on reading); C is written
//! little-endian, C order, in the inputs' type. Only what the runtime
//! needs: a reader that names every mismatch and a writer.

use crate::runtime::batch::Batch;
use crate::runtime::data::{InputFile, Sink, Source};
use crate::runtime::product::Blocks;
use anyhow::{bail, Context, Result};
use dls_lp::rectangles::Rect;
use dls_protocol::{DType, Form, Shape, Values};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

const MAGIC: &[u8] = b"\x93NUMPY";

/// Matrices of one file: `count` of `rows`×`cols` (`None`: a single
/// matrix, a rank-2 array), row-major, back to back.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrices {
    pub count: Option<usize>,
    pub rows: usize,
    pub cols: usize,
    pub data: Values,
}

fn field<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header.find(&format!("'{key}'"))?;
    let rest = header[at + key.len() + 2..].trim_start();
    rest.strip_prefix(':').map(str::trim_start)
}

/// How the values of a file are laid out: byte order and axis order.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Order {
    /// Big-endian values ('>f8', '>f4').
    pub big_endian: bool,
    /// Fortran (column-major) order over the whole array.
    pub fortran: bool,
}

fn parse_descr(descr: &str, origin: &str) -> Result<(DType, bool)> {
    let native_big = cfg!(target_endian = "big");
    Ok(match descr {
        "<f8" => (DType::F64, false),
        ">f8" => (DType::F64, true),
        "=f8" => (DType::F64, native_big),
        "<f4" => (DType::F32, false),
        ">f4" => (DType::F32, true),
        "=f4" => (DType::F32, native_big),
        _ => bail!(
            "{origin}: dtype {descr:?} is neither float32 nor float64 ('<f4', '<f8'); convert with numpy: a.astype('<f8')"
        ),
    })
}

fn parse_header(header: &str, origin: &str) -> Result<(Vec<usize>, DType, Order)> {
    let descr = field(header, "descr").with_context(|| format!("{origin}: header has no 'descr'"))?;
    let descr = descr.split(['\'', '"']).nth(1).unwrap_or("");
    let (dtype, big_endian) = parse_descr(descr, origin)?;
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
        .map(|shape| (shape, dtype, Order { big_endian, fortran }))
}

/// Where a `.npy` file's matrices are: `count` (`None`: one matrix, rank
/// 2) of `rows`×`cols` values of `dtype` from byte `prefix`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Layout {
    pub count: Option<usize>,
    pub rows: usize,
    pub cols: usize,
    pub dtype: DType,
    pub prefix: u64,
    pub order: Order,
}

impl Layout {
    /// Values in the file.
    pub fn values(&self) -> usize {
        self.count.unwrap_or(1) * self.rows * self.cols
    }
}

/// Bytes of the magic, version and header length of a version 1 file.
const MIN_PREFIX: usize = 10;

/// The layout of a `.npy` file of `file_len` bytes that starts with `head`
/// (at least its magic, version, header length and header; more is
/// ignored). Pure and total: any bytes give a layout or an error naming
/// `origin`, and a layout is given only when the file holds exactly the
/// values its shape says, of rank 2 or 3.
pub fn layout(head: &[u8], file_len: u64, origin: &str) -> Result<Layout> {
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
    let (shape, dtype, order) = parse_header(&header, origin)?;
    let (count, rows, cols) = match shape[..] {
        [m, r, c] => (Some(m), r, c),
        [r, c] => (None, r, c),
        _ => bail!(
            "{origin}: shape {shape:?} has rank {}; expected 3, (M, rows, cols), or 2 for one matrix",
            shape.len()
        ),
    };
    // The shape is checked against the file's size before anything is
    // allocated: a header can claim any shape.
    let size = dtype.size() as usize;
    let values = count
        .unwrap_or(1)
        .checked_mul(rows)
        .and_then(|x| x.checked_mul(cols))
        .filter(|&c| c.checked_mul(size).is_some())
        .with_context(|| format!("{origin}: shape {shape:?} is too large"))?;
    let prefix = (start + header_len) as u64;
    if file_len < prefix {
        bail!("{origin}: truncated header");
    }
    let held = (file_len - prefix) / size as u64;
    if (values as u64) > held {
        bail!(
            "{origin}: holds fewer values than its shape {shape:?} says ({held} of {values}; is the file truncated?)"
        );
    }
    if (values as u64) < held || !(file_len - prefix).is_multiple_of(size as u64) {
        bail!("{origin}: holds more bytes than its shape {shape:?} says");
    }
    Ok(Layout {
        count,
        rows,
        cols,
        dtype,
        prefix,
        order,
    })
}

/// Values as read from a file (raw bytes in each slot) in this machine's
/// byte order.
fn to_host(data: &mut Values, big_endian: bool) {
    match data {
        Values::F64(v) => v.iter_mut().for_each(|x| {
            let raw = x.to_ne_bytes();
            *x = if big_endian {
                f64::from_be_bytes(raw)
            } else {
                f64::from_le_bytes(raw)
            };
        }),
        Values::F32(v) => v.iter_mut().for_each(|x| {
            let raw = x.to_ne_bytes();
            *x = if big_endian {
                f32::from_be_bytes(raw)
            } else {
                f32::from_le_bytes(raw)
            };
        }),
    }
}

/// An (m, rows, cols) array in Fortran order (element (i, r, c) at
/// i + m·(r + rows·c)) in C order (at (i·rows + r)·cols + c). Holds a
/// second copy while it reorders.
pub fn from_fortran<T: Copy + Default>(data: &[T], m: usize, rows: usize, cols: usize) -> Vec<T> {
    let mut out = vec![T::default(); data.len()];
    for c in 0..cols {
        for r in 0..rows {
            let src = m * (r + rows * c);
            for i in 0..m {
                out[(i * rows + r) * cols + c] = data[src + i];
            }
        }
    }
    out
}

/// The longest header believed.
const MAX_HEADER: usize = 1 << 20;

/// Open a `.npy` file and read its layout (the values stay unread).
pub fn open(path: &Path) -> Result<(std::fs::File, Layout)> {
    let origin = path.display().to_string();
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {origin}"))?;
    let file_len = f.metadata().with_context(|| format!("reading {origin}"))?.len();
    // The prefix and the header, at most: what `layout` needs.
    let mut head = Vec::new();
    (&mut f)
        .take((12 + MAX_HEADER) as u64)
        .read_to_end(&mut head)
        .with_context(|| format!("reading {origin}"))?;
    let l = layout(&head, file_len, &origin)?;
    f.seek(std::io::SeekFrom::Start(l.prefix))
        .with_context(|| format!("reading {origin}"))?;
    Ok((f, l))
}

/// The values of a file opened by [`open`], in C order and host byte order.
fn read_values(mut f: std::fs::File, l: &Layout, origin: &str) -> Result<Values> {
    let n = l.values();
    let mut data =
        Values::try_zeros(l.dtype, n).with_context(|| format!("{origin}: not enough memory for {n} values"))?;
    f.read_exact(data.as_bytes_mut())
        .with_context(|| format!("{origin}: holds fewer values than its shape says"))?;
    to_host(&mut data, l.order.big_endian);
    if l.order.fortran {
        let m = l.count.unwrap_or(1);
        data = match data {
            Values::F64(v) => Values::F64(from_fortran(&v, m, l.rows, l.cols)),
            Values::F32(v) => Values::F32(from_fortran(&v, m, l.rows, l.cols)),
        };
    }
    Ok(data)
}

/// Read a float32 or float64 array of rank 3 (M, rows, cols) or 2 (rows, cols).
pub fn read(path: &Path) -> Result<Matrices> {
    let (f, l) = open(path)?;
    let data = read_values(f, &l, &path.display().to_string())?;
    Ok(Matrices {
        count: l.count,
        rows: l.rows,
        cols: l.cols,
        data,
    })
}

/// Write an array of shape (M, rows, cols), or (rows, cols) for `count`
/// `None` (format version 1.0, little-endian, C order).
pub fn write(path: &Path, mats: &Matrices) -> Result<()> {
    let origin = path.display().to_string();
    let shape = match mats.count {
        Some(m) => format!("({m}, {}, {})", mats.rows, mats.cols),
        None => format!("({}, {})", mats.rows, mats.cols),
    };
    let header = header_bytes(mats.data.dtype(), &shape);
    crate::output::atomic_write(path, |f| {
        f.write_all(&header)?;
        f.write_all(&mats.data.le_bytes())
    })
    .with_context(|| format!("writing {origin}"))
}

/// Magic, version 1.0, header length and header of a little-endian,
/// C-ordered array of `dtype` and `shape` (as numpy writes it, e.g.
/// "(3, 4, 5)"), padded so the values start at a multiple of 64 bytes.
fn header_bytes(dtype: DType, shape: &str) -> Vec<u8> {
    let descr = match dtype {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
    };
    framed(&format!(
        "{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    ))
}

/// Magic, version 1.0, length and the header text `dict`, padded as numpy
/// pads it: magic (6) + version (2) + length (2) + header + '\n' is a
/// multiple of 64.
fn framed(dict: &str) -> Vec<u8> {
    let mut header = dict.to_string();
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = MAGIC.to_vec();
    out.extend([1, 0]);
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    out
}

/// What the command line says of the products, each checked against the
/// files when given.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Expect {
    pub shape: Option<Shape>,
    pub dtype: Option<DType>,
    /// `--shared-b`: B must be one (k, m) matrix.
    pub shared_b: bool,
    /// `--size` or `--shape`, as the user wrote it, for messages.
    pub shape_flag: Option<&'static str>,
}

/// The form of the products in two files' layouts: A (M, n, k) and B
/// (M, k, m), or one (k, m) shared. Names both files and what disagrees.
pub fn form_of(a: (&Path, &Layout), b: (&Path, &Layout), want: &Expect) -> Result<(Form, usize)> {
    let ((pa, la), (pb, lb)) = (a, b);
    let Some(count) = la.count else {
        bail!(
            "{}: A is one {}×{} matrix; A holds the batch, shape (M, n, k)",
            pa.display(),
            la.rows,
            la.cols
        );
    };
    if la.dtype != lb.dtype {
        bail!(
            "{} holds {} values but {} holds {}: A and B must have one type",
            pa.display(),
            la.dtype,
            pb.display(),
            lb.dtype
        );
    }
    if lb.rows != la.cols {
        bail!(
            "{} holds matrices of {}×{} but {} holds B's of {}×{}: B needs {} rows, as many as A has columns (A is n×k, B k×m)",
            pa.display(),
            la.rows,
            la.cols,
            pb.display(),
            lb.rows,
            lb.cols,
            la.cols
        );
    }
    if let Some(mb) = lb.count {
        if mb != count {
            bail!(
                "{} holds {count} matrices but {} holds {mb}: A and B must pair up (or give one (k, m) B for all)",
                pa.display(),
                pb.display()
            );
        }
    }
    if want.shared_b && lb.count.is_some() {
        bail!(
            "--shared-b: {} holds {} matrices; a shared B is one matrix of shape (k, m)",
            pb.display(),
            lb.count.unwrap_or(0)
        );
    }
    let dim = |v: usize, what: &str| {
        u32::try_from(v).with_context(|| format!("{}: {what} = {v} is larger than the protocol carries", pa.display()))
    };
    let form = Form {
        shape: Shape {
            n: dim(la.rows, "n")?,
            k: dim(la.cols, "k")?,
            m: dim(lb.cols, "m")?,
        },
        dtype: la.dtype,
        shared_b: lb.count.is_none(),
    };
    if let Some(s) = want.shape.filter(|s| *s != form.shape) {
        bail!(
            "the files hold products of {} but {} says {s}",
            form.shape,
            want.shape_flag.unwrap_or("--shape")
        );
    }
    if let Some(d) = want.dtype.filter(|d| *d != form.dtype) {
        bail!("the files hold {} values but --dtype is {d}", form.dtype);
    }
    Ok((form, count))
}

/// A batch from two `.npy` files: A of shape (M, n, k) and B of shape (M,
/// k, m), or (k, m) for one B shared by every product; float32 or float64,
/// both the same. Both headers are checked before any value is read. C-ordered
/// files are read chunk by chunk as the chunks are sent (the master holds
/// the chunks in flight, not the batch); a Fortran-ordered one, and a
/// shared B, are read whole. `with_c`: C will be held in memory too.
pub fn read_batch(a: &Path, b: &Path, want: &Expect, with_c: bool) -> Result<Batch> {
    let (fa, la) = open(a)?;
    let (fb, lb) = open(b)?;
    let (form, count) = form_of((a, &la), (b, &lb), want)?;
    // What must be held whole: Fortran-ordered inputs, a shared B, and C
    // when it is not streamed to a file.
    let whole = |l: &Layout| l.order.fortran || l.count.is_none();
    let mut held = 0u64;
    for l in [&la, &lb].into_iter().filter(|l| whole(l)) {
        held = held.saturating_add(l.values() as u64 * l.dtype.size());
    }
    if with_c {
        held = held.saturating_add(form.out_bytes(1).saturating_mul(count as u64));
    }
    if let Some(avail) = crate::runtime::batch::available_memory().filter(|&m| held > m) {
        bail!(
            "{} and {}: the master must hold {} of this batch (C without --output, Fortran-ordered inputs), more than the {} this machine has available",
            a.display(),
            b.display(),
            crate::runtime::batch::human_bytes(held),
            crate::runtime::batch::human_bytes(avail)
        );
    }
    let source = |f: std::fs::File, l: &Layout, path: &Path| -> Result<Source> {
        if whole(l) {
            return Ok(Source::Memory(Arc::new(read_values(
                f,
                l,
                &path.display().to_string(),
            )?)));
        }
        Ok(file_source(f, l, path))
    };
    let (sa, sb) = (source(fa, &la, a)?, source(fb, &lb, b)?);
    Batch::from_sources(form, count, sa, sb)
}

/// The values of a file opened by [`open`], read where they lie.
fn file_source(file: std::fs::File, l: &Layout, path: &Path) -> Source {
    Source::File(Arc::new(InputFile {
        file,
        path: path.to_path_buf(),
        prefix: l.prefix,
        dtype: l.dtype,
        big_endian: l.order.big_endian,
        len: l.values(),
    }))
}

/// C written into a `.npy` file as the results arrive, each product in its
/// place: the file is made at its full size under a temporary name beside
/// the target, and renamed to it by [`NpyWriter::finish`] once every product
/// is in (never a partial file under the final name).
pub struct NpyWriter {
    staged: crate::output::atomic::Staged,
    prefix: u64,
    /// Bytes of one C (of one value, for one product's C).
    c_bytes: u64,
    /// Values in a row of one product's C (0 for a batch).
    row: usize,
}

impl NpyWriter {
    /// A file for the results of `count` products of `form`: shape (count,
    /// n, m), the form's type, little-endian, C order.
    pub fn create(path: &Path, form: &Form, count: usize) -> Result<NpyWriter> {
        NpyWriter::staged(path, form, count, |len| {
            crate::output::atomic::Staged::create(path, len)
        })
    }

    /// A file for one product's C: shape (n, m), `dtype`, little-endian,
    /// C order, written a rectangle at a time ([`Blocks`]).
    pub fn matrix(path: &Path, dtype: DType, n: usize, m: usize) -> Result<NpyWriter> {
        let header = header_bytes(dtype, &format!("({n}, {m})"));
        let stage = |len| crate::output::atomic::Staged::create(path, len);
        let mut w = NpyWriter::with_header(path, header, dtype.size(), n.saturating_mul(m), stage)?;
        w.row = m;
        Ok(w)
    }

    /// As [`NpyWriter::create`], staged under `partial`, which outlives
    /// this process until the file is complete (a resumable run): a new
    /// file when `fresh`, else the one an earlier run left there.
    pub fn resumable(path: &Path, partial: &Path, form: &Form, count: usize, fresh: bool) -> Result<NpyWriter> {
        NpyWriter::staged(path, form, count, |len| {
            crate::output::atomic::Staged::persistent(path, partial, len, fresh)
        })
    }

    fn staged(
        path: &Path,
        form: &Form,
        count: usize,
        stage: impl FnOnce(u64) -> std::io::Result<crate::output::atomic::Staged>,
    ) -> Result<NpyWriter> {
        let header = header_bytes(form.dtype, &format!("({count}, {}, {})", form.shape.n, form.shape.m));
        NpyWriter::with_header(path, header, form.c_bytes(), count, stage)
    }

    /// A file of `header`, then `count` items of `c_bytes` each, staged by
    /// `stage` (given the file's length).
    fn with_header(
        path: &Path,
        header: Vec<u8>,
        c_bytes: u64,
        count: usize,
        stage: impl FnOnce(u64) -> std::io::Result<crate::output::atomic::Staged>,
    ) -> Result<NpyWriter> {
        let len = c_bytes
            .checked_mul(count as u64)
            .and_then(|v| v.checked_add(header.len() as u64))
            .with_context(|| {
                format!(
                    "{}: {count} results of {c_bytes} bytes are too large a file",
                    path.display()
                )
            })?;
        let staged = stage(len).with_context(|| format!("creating the output file for {}", path.display()))?;
        staged
            .file
            .write_all_at(&header, 0)
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(NpyWriter {
            staged,
            prefix: header.len() as u64,
            c_bytes,
            row: 0,
        })
    }

    /// The file being written (to sync it before journalling).
    pub fn file(&self) -> &std::fs::File {
        &self.staged.file
    }

    /// Every product is in: flush and give the file its name.
    pub fn finish(self) -> Result<std::path::PathBuf> {
        Ok(self.staged.commit()?)
    }
}

impl Sink for NpyWriter {
    fn store(&mut self, product: usize, c: &Values, range: std::ops::Range<usize>) -> std::io::Result<()> {
        let per = range.len();
        self.store_run(product, c, range, per)
    }

    /// One write for the whole run: its products lie back to back in C.
    fn store_run(
        &mut self,
        first: usize,
        c: &Values,
        range: std::ops::Range<usize>,
        per: usize,
    ) -> std::io::Result<()> {
        let whole = per > 0 && range.len().is_multiple_of(per) && per as u64 * c.dtype().size() == self.c_bytes;
        if !whole || range.end > c.len() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{} values for results of {} bytes each", range.len(), self.c_bytes),
            ));
        }
        let bytes = c.le_range(range);
        self.staged
            .file
            .write_all_at(&bytes, self.prefix + first as u64 * self.c_bytes)
    }
}

/// One product's C ([`NpyWriter::matrix`]): each row of a rectangle where
/// it lies.
impl Blocks for NpyWriter {
    fn store_block(&mut self, rect: &Rect, c: &Values) -> std::io::Result<()> {
        for i in 0..rect.height {
            let first = (rect.row + i) * self.row + rect.col;
            self.store_run(first, c, i * rect.width..(i + 1) * rect.width, 1)?;
        }
        Ok(())
    }
}

mod product;
pub use product::read_product;

#[cfg(test)]
mod tests;
