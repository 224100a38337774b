//! External tensor data (`.ptd` files, FlatBuffer identifier `FT01`).

use std::collections::BTreeMap;
use std::ops::Range;

use crate::error::{Error, Result};
use crate::fb::{Budget, Table};
use crate::generated::flat_tensor as s;
use crate::program::SharedBytes;

/// Length of the `FH01` header as written.
pub const FH01_LEN: u32 = 40;

/// A parsed `.ptd` file: named blobs, by key.
#[derive(Clone)]
pub struct ExternalData {
    file: SharedBytes,
    entries: BTreeMap<String, Range<usize>>,
}

impl std::fmt::Debug for ExternalData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalData").field("len", &self.bytes().len()).field("keys", &self.entries.len()).finish()
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(raw)
}

impl ExternalData {
    /// Parses a `.ptd` file.
    pub fn from_bytes(file: SharedBytes) -> Result<Self> {
        let data: &[u8] = (*file).as_ref();
        let head = 8 + FH01_LEN as usize;
        if data.len() < head {
            return Err(Error::Truncated { what: ".ptd file", needed: head as u64, found: data.len() as u64 });
        }
        if &data[4..8] != s::FILE_IDENTIFIER {
            let found = data[4..8].escape_ascii().to_string();
            return Err(Error::Identifier { what: ".ptd file", expected: "FT01", found });
        }
        if &data[8..12] != b"FH01" {
            let found = data[8..12].escape_ascii().to_string();
            return Err(Error::Identifier { what: ".ptd header", expected: "FH01", found });
        }
        let fb_offset = u64_at(data, 16);
        let fb_size = u64_at(data, 24);
        let base = u64_at(data, 32);
        let fb_end =
            fb_offset.checked_add(fb_size).filter(|&e| e <= data.len() as u64).ok_or(Error::RangeOutOfBounds {
                what: ".ptd FlatBuffer",
                start: fb_offset,
                len: fb_size,
                limit: data.len() as u64,
            })?;
        let fb = &data[..fb_end as usize];
        let fbe = |source| Error::Flatbuffer { what: ".ptd", source };
        let budget = Budget::for_buffer(fb.len());
        let root = Table::root(fb, &budget).map_err(fbe)?;
        let mut segments = Vec::new();
        for seg in root.tables(s::flat_tensor::SEGMENTS).map_err(fbe)?.iter() {
            let seg = seg.map_err(fbe)?;
            let off = seg.scalar(s::data_segment::OFFSET).map_err(fbe)?;
            let size = seg.scalar(s::data_segment::SIZE).map_err(fbe)?;
            let start = base.checked_add(off);
            match start.and_then(|s| s.checked_add(size)) {
                Some(end) if end <= data.len() as u64 => segments.push(start.unwrap_or(0) as usize..end as usize),
                _ => {
                    return Err(Error::RangeOutOfBounds {
                        what: ".ptd segment",
                        start: start.unwrap_or(u64::MAX),
                        len: size,
                        limit: data.len() as u64,
                    });
                }
            }
        }
        let mut entries = BTreeMap::new();
        for nd in root.tables(s::flat_tensor::NAMED_DATA).map_err(fbe)?.iter() {
            let nd = nd.map_err(fbe)?;
            let key = nd.string(s::named_data::KEY).map_err(fbe)?.unwrap_or_default().to_string();
            let idx = nd.scalar(s::named_data::SEGMENT_INDEX).map_err(fbe)? as usize;
            let range = segments.get(idx).cloned().ok_or(Error::IndexOutOfRange {
                what: ".ptd segment index",
                index: idx as i64,
                len: segments.len(),
            })?;
            entries.insert(key, range);
        }
        Ok(Self { file, entries })
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        (*self.file).as_ref()
    }

    /// The byte range stored under `key`.
    pub fn get(&self, key: &str) -> Option<Range<usize>> {
        self.entries.get(key).cloned()
    }

    /// All keys.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }
}
