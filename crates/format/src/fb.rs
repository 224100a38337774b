//! A small, safe FlatBuffers reader for untrusted bytes.
//!
//! Every access is bounds-checked and returns [`FbError`] instead of
//! panicking, so no separate verification pass is needed: a buffer is valid
//! exactly as far as it is read. Navigation follows the schema (never the
//! data), so a hostile buffer cannot make the reader loop or recurse, and
//! nothing is allocated in proportion to a length field before that length
//! has been checked against the buffer.
//!
//! The field descriptors ([`Scalar`], [`Offset`], [`Union`]) are emitted by
//! `cargo xtask codegen` from the schemas in `crates/format/schema/`.

use std::cell::Cell;
use std::marker::PhantomData;

/// Why a FlatBuffer could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} at byte {offset}: {problem}")]
pub struct FbError {
    /// The schema field (or structure) being read, e.g. `Tensor.sizes`.
    pub field: &'static str,
    /// Byte offset inside the FlatBuffer where the problem was found.
    pub offset: usize,
    /// What was wrong.
    pub problem: FbProblem,
}

/// The kinds of malformation the reader detects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FbProblem {
    /// A read of `len` bytes would run past the end of the buffer.
    #[error("{len} bytes needed but the buffer ends at {buffer_len}")]
    OutOfBounds {
        /// Bytes the read needs.
        len: u64,
        /// Bytes the buffer has.
        buffer_len: usize,
    },
    /// A vtable is shorter than its header or not a multiple of two.
    #[error("invalid vtable size {0}")]
    BadVtable(u16),
    /// A field lies outside its table's inline size.
    #[error("field offset {field_offset} outside table of {table_len} bytes")]
    FieldOutsideTable {
        /// The field's offset in its table, from the vtable.
        field_offset: u16,
        /// The table's inline size, from the vtable.
        table_len: u16,
    },
    /// A string is not UTF-8.
    #[error("string is not valid UTF-8")]
    BadUtf8,
    /// The buffer references the same data so often that reading it would
    /// take more memory than [`Budget`] allows (a decompression bomb).
    #[error("reading the buffer would copy more than {limit} bytes")]
    BudgetExceeded {
        /// The most bytes the budget allows.
        limit: u64,
    },
    /// A union type tag the schema does not define.
    #[error("unknown union type tag {0}")]
    UnknownUnionTag(u8),
    /// A union's value table is missing although its type is set.
    #[error("union type {0} set but its value is missing")]
    UnionWithoutValue(u8),
}

/// A scalar that can be read little-endian from a buffer.
pub trait LeScalar: Copy + 'static {
    /// Size in bytes.
    const SIZE: usize;
    /// Decodes from exactly [`Self::SIZE`] bytes.
    fn from_le(bytes: &[u8]) -> Self;
}

macro_rules! le_scalar {
    ($($t:ty),*) => {$(
        impl LeScalar for $t {
            const SIZE: usize = size_of::<$t>();
            fn from_le(bytes: &[u8]) -> Self {
                let mut raw = [0u8; size_of::<$t>()];
                raw.copy_from_slice(bytes);
                <$t>::from_le_bytes(raw)
            }
        }
    )*};
}
le_scalar!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

impl LeScalar for bool {
    const SIZE: usize = 1;
    fn from_le(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
}

/// A scalar field: its slot, its name for errors, and its schema default.
#[derive(Debug, Clone, Copy)]
pub struct Scalar<T> {
    /// Field slot id (`#n` in the schema listings).
    pub slot: u16,
    /// `Table.field`, for error messages.
    pub name: &'static str,
    /// Value when the field is absent.
    pub default: T,
}

/// Marker: a string field.
#[derive(Debug, Clone, Copy)]
pub struct Str;
/// Marker: a sub-table field.
#[derive(Debug, Clone, Copy)]
pub struct Tbl;

/// A field reached through an offset: a string, table or vector.
#[derive(Debug, Clone, Copy)]
pub struct Offset<T: ?Sized> {
    /// Field slot id.
    pub slot: u16,
    /// `Table.field`, for error messages.
    pub name: &'static str,
    /// What the offset points at.
    pub kind: PhantomData<T>,
}

/// A union field: the `u8` type tag sits in `slot`, the table in `slot + 1`.
#[derive(Debug, Clone, Copy)]
pub struct Union {
    /// Slot of the type tag.
    pub slot: u16,
    /// `Table.field`, for error messages.
    pub name: &'static str,
}

fn oob(field: &'static str, offset: usize, len: u64, buffer_len: usize) -> FbError {
    FbError { field, offset, problem: FbProblem::OutOfBounds { len, buffer_len } }
}

fn read<T: LeScalar>(buf: &[u8], pos: usize, field: &'static str) -> Result<T, FbError> {
    match pos.checked_add(T::SIZE) {
        Some(end) if end <= buf.len() => Ok(T::from_le(&buf[pos..end])),
        _ => Err(oob(field, pos, T::SIZE as u64, buf.len())),
    }
}

/// Follows a `uoffset` stored at `pos`.
fn follow(buf: &[u8], pos: usize, field: &'static str) -> Result<usize, FbError> {
    let rel = read::<u32>(buf, pos, field)? as usize;
    match pos.checked_add(rel) {
        Some(target) if target < buf.len() => Ok(target),
        _ => Err(oob(field, pos, rel as u64, buf.len())),
    }
}

/// A cap on the bytes a reader may copy out of one buffer.
///
/// FlatBuffers can reference one string or vector from many places, so a
/// small hostile buffer could otherwise expand into gigabytes of copies.
/// Every table opened, string read and vector read is charged against it.
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    used: Cell<u64>,
}

impl Budget {
    /// A budget proportional to the buffer: 16 bytes per buffer byte plus
    /// 64 KiB, far above what a well-formed file needs.
    pub fn for_buffer(len: usize) -> Self {
        Self { limit: 16 * len as u64 + 65536, used: Cell::new(0) }
    }

    fn charge(&self, n: u64, field: &'static str, offset: usize) -> Result<(), FbError> {
        let used = self.used.get().saturating_add(n);
        self.used.set(used);
        if used > self.limit {
            Err(FbError { field, offset, problem: FbProblem::BudgetExceeded { limit: self.limit } })
        } else {
            Ok(())
        }
    }
}

/// A table inside a buffer.
#[derive(Debug, Clone, Copy)]
pub struct Table<'a> {
    buf: &'a [u8],
    budget: &'a Budget,
    pos: usize,
    vtable: usize,
    vtable_len: u16,
    inline_len: u16,
}

impl<'a> Table<'a> {
    /// Opens the root table (the caller checks the file identifier).
    pub fn root(buf: &'a [u8], budget: &'a Budget) -> Result<Self, FbError> {
        let pos = follow(buf, 0, "root offset")?;
        Self::at(buf, budget, pos, "root table")
    }

    fn at(buf: &'a [u8], budget: &'a Budget, pos: usize, field: &'static str) -> Result<Self, FbError> {
        budget.charge(16, field, pos)?;
        let soffset = read::<i32>(buf, pos, field)? as i64;
        let vtable = pos as i64 - soffset;
        if vtable < 0 || vtable as u64 >= buf.len() as u64 {
            return Err(oob(field, pos, 4, buf.len()));
        }
        let vtable = vtable as usize;
        let vtable_len = read::<u16>(buf, vtable, field)?;
        let inline_len = read::<u16>(buf, vtable + 2, field)?;
        if vtable_len < 4 || vtable_len % 2 != 0 {
            return Err(FbError { field, offset: vtable, problem: FbProblem::BadVtable(vtable_len) });
        }
        if vtable + vtable_len as usize > buf.len() {
            return Err(oob(field, vtable, u64::from(vtable_len), buf.len()));
        }
        if pos + inline_len as usize > buf.len() || inline_len < 4 {
            return Err(oob(field, pos, u64::from(inline_len), buf.len()));
        }
        Ok(Self { buf, budget, pos, vtable, vtable_len, inline_len })
    }

    /// Byte offset of this table in its buffer.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// The absolute position of a field's inline data, if present.
    fn field_pos(&self, slot: u16, size: usize, name: &'static str) -> Result<Option<usize>, FbError> {
        let entry = 4 + 2 * slot as usize;
        if entry + 2 > self.vtable_len as usize {
            return Ok(None);
        }
        let field_offset: u16 = read(self.buf, self.vtable + entry, name)?;
        if field_offset == 0 {
            return Ok(None);
        }
        if field_offset < 4 || field_offset as usize + size > self.inline_len as usize {
            return Err(FbError {
                field: name,
                offset: self.pos,
                problem: FbProblem::FieldOutsideTable { field_offset, table_len: self.inline_len },
            });
        }
        Ok(Some(self.pos + field_offset as usize))
    }

    /// Reads a scalar field, or its default when absent.
    pub fn scalar<T: LeScalar>(&self, f: Scalar<T>) -> Result<T, FbError> {
        match self.field_pos(f.slot, T::SIZE, f.name)? {
            Some(pos) => read(self.buf, pos, f.name),
            None => Ok(f.default),
        }
    }

    /// Whether a field is stored at all (defaults are not stored).
    pub fn has(&self, slot: u16) -> bool {
        matches!(self.field_pos(slot, 0, "presence"), Ok(Some(_)))
    }

    fn target(&self, slot: u16, name: &'static str) -> Result<Option<usize>, FbError> {
        match self.field_pos(slot, 4, name)? {
            Some(pos) => follow(self.buf, pos, name).map(Some),
            None => Ok(None),
        }
    }

    /// Reads a string field.
    pub fn string(&self, f: Offset<Str>) -> Result<Option<&'a str>, FbError> {
        let Some(target) = self.target(f.slot, f.name)? else { return Ok(None) };
        let bytes = vector_bytes(self.buf, target, 1, f.name)?;
        self.budget.charge(bytes.len() as u64, f.name, target)?;
        std::str::from_utf8(bytes).map(Some).map_err(|_| FbError {
            field: f.name,
            offset: target,
            problem: FbProblem::BadUtf8,
        })
    }

    /// Reads a sub-table field.
    pub fn table(&self, f: Offset<Tbl>) -> Result<Option<Table<'a>>, FbError> {
        match self.target(f.slot, f.name)? {
            Some(target) => Table::at(self.buf, self.budget, target, f.name).map(Some),
            None => Ok(None),
        }
    }

    /// Reads a vector of scalars.
    pub fn vector<T: LeScalar>(&self, f: Offset<[T]>) -> Result<Option<Vector<'a, T>>, FbError> {
        let Some(target) = self.target(f.slot, f.name)? else { return Ok(None) };
        let bytes = vector_bytes(self.buf, target, T::SIZE, f.name)?;
        self.budget.charge(bytes.len() as u64, f.name, target)?;
        Ok(Some(Vector { bytes, kind: PhantomData }))
    }

    /// Reads a vector of scalars, collected; an absent vector is empty.
    pub fn vec<T: LeScalar>(&self, f: Offset<[T]>) -> Result<Vec<T>, FbError> {
        Ok(self.vector(f)?.map(|v| v.iter().collect()).unwrap_or_default())
    }

    /// Reads a `[ubyte]` field as a byte slice.
    pub fn bytes(&self, f: Offset<[u8]>) -> Result<Option<&'a [u8]>, FbError> {
        Ok(self.vector(f)?.map(|v| v.bytes))
    }

    /// Reads a vector of tables.
    pub fn tables(&self, f: Offset<[Tbl]>) -> Result<Tables<'a>, FbError> {
        let Some(target) = self.target(f.slot, f.name)? else {
            return Ok(Tables { buf: self.buf, budget: self.budget, start: 0, len: 0, name: f.name });
        };
        let bytes = vector_bytes(self.buf, target, 4, f.name)?;
        Ok(Tables { buf: self.buf, budget: self.budget, start: target + 4, len: bytes.len() / 4, name: f.name })
    }

    /// Reads a union: `None` for type 0 (NONE), else the tag and its table.
    pub fn union(&self, f: Union) -> Result<Option<(u8, Table<'a>)>, FbError> {
        let tag = self.scalar(Scalar { slot: f.slot, name: f.name, default: 0u8 })?;
        if tag == 0 {
            return Ok(None);
        }
        match self.target(f.slot + 1, f.name)? {
            Some(target) => Ok(Some((tag, Table::at(self.buf, self.budget, target, f.name)?))),
            None => Err(FbError { field: f.name, offset: self.pos, problem: FbProblem::UnionWithoutValue(tag) }),
        }
    }
}

/// The element bytes of a vector whose length prefix sits at `pos`.
fn vector_bytes<'a>(buf: &'a [u8], pos: usize, elem: usize, name: &'static str) -> Result<&'a [u8], FbError> {
    let len = read::<u32>(buf, pos, name)? as u64;
    let n_bytes = len * elem as u64;
    let start = pos + 4;
    if start as u64 + n_bytes > buf.len() as u64 {
        return Err(oob(name, pos, n_bytes, buf.len()));
    }
    Ok(&buf[start..start + n_bytes as usize])
}

/// A borrowed vector of little-endian scalars.
#[derive(Debug, Clone, Copy)]
pub struct Vector<'a, T> {
    bytes: &'a [u8],
    kind: PhantomData<T>,
}

impl<'a, T: LeScalar + 'a> Vector<'a, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.bytes.len() / T::SIZE
    }

    /// Whether the vector is empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Iterates over the elements.
    pub fn iter(&self) -> impl Iterator<Item = T> + 'a {
        self.bytes.chunks_exact(T::SIZE).map(T::from_le)
    }
}

/// A vector of tables; each element is read (and checked) on access.
#[derive(Debug, Clone, Copy)]
pub struct Tables<'a> {
    buf: &'a [u8],
    budget: &'a Budget,
    start: usize,
    len: usize,
    name: &'static str,
}

impl<'a> Tables<'a> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the vector is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Opens element `idx` (which must be `< len`).
    pub fn get(&self, idx: usize) -> Result<Table<'a>, FbError> {
        assert!(idx < self.len, "Tables::get({idx}) on a vector of {}", self.len);
        let pos = self.start + 4 * idx;
        let target = follow(self.buf, pos, self.name)?;
        Table::at(self.buf, self.budget, target, self.name)
    }

    /// Iterates over the elements, each checked on access.
    pub fn iter(&self) -> impl Iterator<Item = Result<Table<'a>, FbError>> + '_ {
        (0..self.len).map(|i| self.get(i))
    }
}
