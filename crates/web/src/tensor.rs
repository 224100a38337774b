//! Tensors as JavaScript sees them: `{ dtype, shape, data }`, `data` a
//! typed array (`Float32Array`, `BigInt64Array`, ...; float16 and bfloat16
//! as the raw bits in a `Uint16Array`, bool as a `Uint8Array`).

use etwgpu_format::DType;
use etwgpu_runtime::Tensor;
use js_sys::{Array, Object, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};

use crate::error::{Error, Result};

fn get(obj: &JsValue, key: &str) -> JsValue {
    Reflect::get(obj, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

fn set(obj: &Object, key: &str, value: &JsValue) {
    Reflect::set(obj, &JsValue::from_str(key), value).expect("setting a field of a plain object");
}

/// The dtype a typed array holds by default, from its constructor name.
fn dtype_of_array(name: &str) -> Option<DType> {
    Some(match name {
        "Float32Array" => DType::F32,
        "Float64Array" => DType::F64,
        "Int32Array" => DType::I32,
        "BigInt64Array" => DType::I64,
        "Int16Array" => DType::I16,
        "Int8Array" => DType::I8,
        "Uint8Array" => DType::U8,
        "Uint16Array" => DType::F16,
        _ => return None,
    })
}

/// The typed array constructor for a dtype's elements.
fn array_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "Float32Array",
        DType::F64 => "Float64Array",
        DType::I32 => "Int32Array",
        DType::I64 => "BigInt64Array",
        DType::I16 => "Int16Array",
        DType::I8 => "Int8Array",
        DType::U8 | DType::Bool => "Uint8Array",
        DType::F16 | DType::BF16 => "Uint16Array",
    }
}

/// Reads `{ data, shape, dtype? }` (`what` names it in errors). Without
/// `dtype`, the typed array's kind decides (a `Uint16Array` is float16).
pub fn tensor_from_js(value: &JsValue, what: &str) -> Result<Tensor> {
    let bad = |field: &str, expected| Error::BadArgument { what: format!("{what}{field}"), expected };
    let data = get(value, "data");
    let name = get(&get(&data, "constructor"), "name").as_string().unwrap_or_default();
    let dtype = match get(value, "dtype").as_string() {
        Some(d) => DType::from_torch_name(&d).ok_or_else(|| bad(".dtype", "a dtype name such as \"float32\""))?,
        None => dtype_of_array(&name).ok_or_else(|| bad(".data", "a typed array such as Float32Array"))?,
    };
    if name != array_name(dtype) {
        return Err(bad(".data", "the typed array of its dtype (Float32Array for float32, ...)"));
    }
    let shape_value = get(value, "shape");
    if !Array::is_array(&shape_value) {
        return Err(bad(".shape", "an array of sizes"));
    }
    let shape = Array::from(&shape_value)
        .iter()
        .map(|d| d.as_f64().filter(|d| d.fract() == 0.0 && *d >= 0.0).map(|d| d as u64))
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(|| bad(".shape", "non-negative integer sizes"))?;
    let buffer = get(&data, "buffer");
    let offset = get(&data, "byteOffset").as_f64().unwrap_or(0.0) as u32;
    let length = get(&data, "byteLength").as_f64().unwrap_or(0.0) as u32;
    let bytes = Uint8Array::new_with_byte_offset_and_length(&buffer, offset, length).to_vec();
    Tensor::new(dtype, shape, bytes).map_err(|_| bad(".data", "as many elements as the shape holds"))
}

/// `{ dtype, shape, data }` for JavaScript.
pub fn tensor_to_js(t: &Tensor) -> JsValue {
    let obj = Object::new();
    set(&obj, "dtype", &JsValue::from_str(t.dtype.torch_name()));
    let shape: Array = t.shape.iter().map(|&d| JsValue::from_f64(d as f64)).collect();
    set(&obj, "shape", &shape);
    let bytes = Uint8Array::from(t.bytes.as_slice());
    let ctor = get(&js_sys::global(), array_name(t.dtype));
    let args: Array = [bytes.buffer().into(), JsValue::from_f64(0.0), JsValue::from_f64(t.numel() as f64)]
        .into_iter()
        .collect::<Array>();
    let ctor: &js_sys::Function = ctor.unchecked_ref();
    let data = Reflect::construct(ctor, &args).expect("typed arrays construct over a buffer");
    set(&obj, "data", &data);
    obj.into()
}
