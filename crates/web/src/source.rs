//! Reading a program's bytes from what a page has: a `Uint8Array` or
//! `ArrayBuffer`, a `Blob` or `File`, a `fetch` `Response` or a
//! `ReadableStream`. Blobs are read one bounded slice at a time and
//! streams one chunk at a time, each copied straight into the one buffer
//! in wasm memory that the program is parsed from: JavaScript never holds
//! the whole file, so a load costs one copy of the file (in wasm memory),
//! not two.

use js_sys::{Function, Object, Promise, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::error::{Error, Result};

/// Bytes read per `Blob` slice unless `chunkBytes` says otherwise.
pub const DEFAULT_CHUNK_BYTES: u64 = 16 << 20;

pub(crate) fn get(obj: &JsValue, key: &str) -> JsValue {
    if obj.is_undefined() || obj.is_null() {
        return JsValue::UNDEFINED;
    }
    Reflect::get(obj, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

pub(crate) fn set(obj: &Object, key: &str, value: impl Into<JsValue>) {
    Reflect::set(obj, &JsValue::from_str(key), &value.into()).expect("setting a field of a plain object");
}

/// The message of a JavaScript exception.
pub(crate) fn message(e: &JsValue) -> String {
    get(e, "message").as_string().or_else(|| e.as_string()).unwrap_or_else(|| format!("{e:?}"))
}

fn read_error(what: &str, e: &JsValue) -> Error {
    Error::Read { problem: format!("{what}: {}", message(e)) }
}

/// Calls method `name` of `obj` with `args`.
fn call(obj: &JsValue, name: &str, args: &[JsValue]) -> Result<JsValue> {
    let f: Function = get(obj, name).dyn_into().map_err(|_| Error::Read { problem: format!("no {name}() method") })?;
    let args: js_sys::Array = args.iter().collect();
    f.apply(obj, &args).map_err(|e| read_error(name, &e))
}

async fn awaited(value: JsValue, what: &str) -> Result<JsValue> {
    let promise: Promise = value.dyn_into().map_err(|_| Error::Read { problem: format!("{what} is not a Promise") })?;
    JsFuture::from(promise).await.map_err(|e| read_error(what, &e))
}

/// Calls `onProgress({ stage, done, total })` if given (`total` null when
/// unknown); an exception thrown by it is ignored.
pub(crate) fn report(on_progress: Option<&Function>, stage: &str, done: u64, total: Option<u64>) {
    if let Some(f) = on_progress {
        let p = Object::new();
        set(&p, "stage", stage);
        set(&p, "done", done as f64);
        set(&p, "total", total.map_or(JsValue::NULL, |t| JsValue::from_f64(t as f64)));
        let _ = f.call1(&JsValue::NULL, &p);
    }
}

/// How a source is read.
pub(crate) struct ReadOptions {
    /// Bytes per `Blob` slice.
    pub chunk_bytes: u64,
    /// `onProgress`.
    pub on_progress: Option<Function>,
}

impl ReadOptions {
    /// `{ chunkBytes?, onProgress? }`.
    pub fn from_js(options: &JsValue) -> Result<Self> {
        let chunk = get(options, "chunkBytes");
        let chunk_bytes = if chunk.is_undefined() || chunk.is_null() {
            DEFAULT_CHUNK_BYTES
        } else {
            chunk.as_f64().filter(|c| c.fract() == 0.0 && *c >= 1.0 && *c <= (1u64 << 32) as f64).ok_or(
                Error::BadArgument { what: "options.chunkBytes".into(), expected: "an integer from 1 to 2^32" },
            )? as u64
        };
        Ok(Self { chunk_bytes, on_progress: on_progress(options)? })
    }
}

/// `options.onProgress`, if it is given.
pub(crate) fn on_progress(options: &JsValue) -> Result<Option<Function>> {
    let f = get(options, "onProgress");
    if f.is_undefined() || f.is_null() {
        return Ok(None);
    }
    f.dyn_into().map(Some).map_err(|_| Error::BadArgument { what: "options.onProgress".into(), expected: "a function" })
}

/// The bytes of `source`, read as described at the top of this module.
pub(crate) async fn read(source: &JsValue, options: &ReadOptions) -> Result<Vec<u8>> {
    let progress = options.on_progress.as_ref();
    if let Some(bytes) = source.dyn_ref::<Uint8Array>() {
        let bytes = bytes.to_vec();
        report(progress, "read", bytes.len() as u64, Some(bytes.len() as u64));
        return Ok(bytes);
    }
    if let Some(buffer) = source.dyn_ref::<js_sys::ArrayBuffer>() {
        let bytes = Uint8Array::new(buffer).to_vec();
        report(progress, "read", bytes.len() as u64, Some(bytes.len() as u64));
        return Ok(bytes);
    }
    let is_fn = |key: &str| get(source, key).is_function();
    if is_fn("slice") && is_fn("arrayBuffer") && get(source, "size").as_f64().is_some() {
        return read_blob(source, options).await;
    }
    if get(source, "headers").is_object() && get(source, "status").as_f64().is_some() {
        return read_response(source, progress).await;
    }
    if is_fn("getReader") {
        return read_stream(source, None, progress).await;
    }
    Err(Error::BadArgument {
        what: "source".into(),
        expected: "a Uint8Array, ArrayBuffer, Blob (File), Response or ReadableStream",
    })
}

/// A `Blob` in slices of `chunk_bytes`, each copied into place.
async fn read_blob(blob: &JsValue, options: &ReadOptions) -> Result<Vec<u8>> {
    let size = get(blob, "size").as_f64().unwrap_or(0.0) as u64;
    let size_usize = usize::try_from(size)
        .ok()
        .filter(|&s| s <= u32::MAX as usize)
        .ok_or(Error::Read { problem: format!("the file is {size} bytes, more than wasm memory holds") })?;
    let mut bytes = vec![0u8; size_usize];
    let mut start = 0u64;
    while start < size {
        let end = (start + options.chunk_bytes).min(size);
        let slice = call(blob, "slice", &[JsValue::from_f64(start as f64), JsValue::from_f64(end as f64)])?;
        let buffer = awaited(call(&slice, "arrayBuffer", &[])?, "Blob.arrayBuffer()").await?;
        let chunk = Uint8Array::new(&buffer);
        if chunk.length() as u64 != end - start {
            return Err(Error::Read {
                problem: format!("the file changed while read: {} bytes at offset {start}", chunk.length()),
            });
        }
        chunk.copy_to(&mut bytes[start as usize..end as usize]);
        start = end;
        report(options.on_progress.as_ref(), "read", start, Some(size));
    }
    Ok(bytes)
}

/// A `fetch` response: its status checked, its body streamed.
async fn read_response(response: &JsValue, progress: Option<&Function>) -> Result<Vec<u8>> {
    if get(response, "ok").as_bool() != Some(true) {
        let status = get(response, "status").as_f64().unwrap_or(0.0);
        let url = get(response, "url").as_string().unwrap_or_default();
        return Err(Error::Read { problem: format!("HTTP status {status} for {url:?}") });
    }
    // The length of the body as sent: a reservation and the progress
    // total, never trusted as the size (a compressed body differs).
    let length = call(&get(response, "headers"), "get", &[JsValue::from_str("content-length")])?
        .as_string()
        .and_then(|s| s.trim().parse::<u64>().ok());
    let body = get(response, "body");
    if body.is_null() || body.is_undefined() {
        return Err(Error::Read { problem: "the response has no body".into() });
    }
    read_stream(&body, length, progress).await
}

/// A `ReadableStream` of `Uint8Array` chunks.
async fn read_stream(stream: &JsValue, length: Option<u64>, progress: Option<&Function>) -> Result<Vec<u8>> {
    let reader = call(stream, "getReader", &[])?;
    let mut bytes = Vec::new();
    if let Some(n) = length.filter(|&n| n <= u32::MAX as u64) {
        bytes.reserve_exact(n as usize);
    }
    loop {
        let next = awaited(call(&reader, "read", &[])?, "reading the stream").await?;
        if get(&next, "done").as_bool() == Some(true) {
            break;
        }
        let chunk: Uint8Array = get(&next, "value")
            .dyn_into()
            .map_err(|_| Error::Read { problem: "a stream chunk is not a Uint8Array".into() })?;
        let at = bytes.len();
        if at as u64 + chunk.length() as u64 > u32::MAX as u64 {
            return Err(Error::Read { problem: "the stream is larger than wasm memory holds".into() });
        }
        bytes.resize(at + chunk.length() as usize, 0);
        chunk.copy_to(&mut bytes[at..]);
        report(progress, "read", bytes.len() as u64, length);
    }
    Ok(bytes)
}

/// The size of wasm memory in bytes; memory never shrinks, so this is
/// also its peak so far.
pub fn wasm_memory_bytes() -> f64 {
    get(&get(&wasm_bindgen::memory(), "buffer"), "byteLength").as_f64().unwrap_or(0.0)
}
