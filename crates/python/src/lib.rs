//! `etwgpu._etwgpu`: the native half of the Python package `etwgpu`.
//!
//! The public API (`etwgpu.Runtime`, `Program`, `Method`, `Llm`) is the
//! Python package in `python/etwgpu/`, shaped like `executorch.runtime`;
//! it turns numpy arrays and torch tensors into the raw triples this module
//! takes (a C-contiguous byte buffer, a dtype name, a shape) and back.
//!
//! - Inputs are read through the buffer protocol (a C-contiguous numpy
//!   array as it is, without a view or conversion in Python): one copy,
//!   into the runtime's [`Tensor`], which owns its bytes.
//! - Outputs leave as [`Bytes`], which own the runtime's output bytes and
//!   lend them through the buffer protocol, so `numpy.frombuffer` (and then
//!   `torch.from_numpy`) wraps them without a copy.
//! - Every call that waits on the GPU releases the GIL; one loaded method
//!   is shared by threads behind a mutex taken with the GIL released.
//! - Every Rust error becomes an `etwgpu.Error` subclass ([`errors`]).

mod errors;
mod llm;

use std::os::raw::c_int;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use etwgpu_format::{DType, Dynamism, PlanValue, Program};
use etwgpu_runtime::{LoadOptions, LoadedMethod, Runtime, Tensor};
use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// Bytes owned by Rust, lent to Python through the buffer protocol
/// (writable, one-dimensional, format `B`): the output tensors' storage,
/// taken over from the runtime's `Vec` as it is (no copy, no shrink).
#[pyclass(frozen, module = "etwgpu._etwgpu")]
struct Bytes {
    /// The allocation, from [`Vec::as_mut_ptr`] of a `Vec` this value now
    /// owns; freed on drop.
    ptr: *mut u8,
    len: usize,
    capacity: usize,
}

// SAFETY: `Bytes` owns its allocation alone; Python code that writes
// through a lent buffer races only with other Python code, as with any
// writable buffer (`bytearray`).
unsafe impl Send for Bytes {}
unsafe impl Sync for Bytes {}

impl Bytes {
    fn new(bytes: Vec<u8>) -> Self {
        let mut bytes = std::mem::ManuallyDrop::new(bytes);
        Self { ptr: bytes.as_mut_ptr(), len: bytes.len(), capacity: bytes.capacity() }
    }
}

impl Drop for Bytes {
    fn drop(&mut self) {
        // SAFETY: `ptr`, `len` and `capacity` are those of a `Vec<u8>` that
        // `new` took apart without freeing, and nothing else frees it.
        drop(unsafe { Vec::from_raw_parts(self.ptr, self.len, self.capacity) });
    }
}

#[pymethods]
impl Bytes {
    fn __len__(&self) -> usize {
        self.len
    }

    /// Lends the bytes. `PyBuffer_FillInfo` keeps a reference to `slf`, so
    /// the bytes outlive every view of them.
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut pyo3::ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("the buffer view is null"));
        }
        let (ptr, len) = (slf.get().ptr, slf.get().len);
        let len = isize::try_from(len).map_err(|_| PyBufferError::new_err("buffer too large"))?;
        // SAFETY: `view` is non-null and points to a `Py_buffer` Python
        // asks us to fill; `ptr` is valid for `len` bytes while `slf` lives.
        let rc = unsafe { pyo3::ffi::PyBuffer_FillInfo(view, slf.as_ptr(), ptr.cast(), len, 0, flags) };
        if rc == 0 { Ok(()) } else { Err(PyErr::fetch(slf.py())) }
    }
}

/// A GPU device: a wgpu adapter with its queue and pipeline cache.
#[pyclass(frozen, name = "_Runtime", module = "etwgpu._etwgpu")]
struct PyRuntime {
    rt: Runtime,
}

/// What `etwgpu devices` says of each adapter, as dicts.
fn adapter_dicts(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for a in py.detach(etwgpu_runtime::adapters) {
        let d = PyDict::new(py);
        d.set_item("index", a.index)?;
        d.set_item("name", a.name)?;
        d.set_item("backend", a.backend)?;
        d.set_item("device_type", a.device_type)?;
        d.set_item("driver", a.driver)?;
        d.set_item("max_storage_binding_bytes", a.max_storage_binding_bytes)?;
        d.set_item("max_buffer_bytes", a.max_buffer_bytes)?;
        d.set_item("features", a.features)?;
        d.set_item("default", a.default_choice)?;
        list.append(d)?;
    }
    Ok(list)
}

#[pymethods]
impl PyRuntime {
    /// Opens a device: on `adapter` (an index or a name substring) when
    /// given, else as the CLI picks (`ETWGPU_ADAPTER`, then a discrete GPU,
    /// then the best other adapter).
    #[new]
    #[pyo3(signature = (adapter=None))]
    fn new(py: Python<'_>, adapter: Option<String>) -> PyResult<Self> {
        let rt = py.detach(|| match &adapter {
            Some(sel) => Runtime::with_adapter(Some(sel)),
            None => Runtime::new(),
        });
        rt.map(|rt| Self { rt }).map_err(|e| errors::runtime(&e))
    }

    /// Every adapter wgpu finds, as dicts.
    #[staticmethod]
    fn adapters(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
        adapter_dicts(py)
    }

    /// The adapter in use: name, backend, device type, driver, features.
    fn device<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let info = self.rt.adapter_info();
        let d = PyDict::new(py);
        d.set_item("name", &info.name)?;
        d.set_item("backend", format!("{:?}", info.backend))?;
        d.set_item("device_type", format!("{:?}", info.device_type))?;
        d.set_item("driver", format!("{} {}", info.driver, info.driver_info).trim().to_string())?;
        d.set_item("features", self.rt.features())?;
        Ok(d)
    }

    /// Parses a `.pte` (with its `.ptd` files), checking every structure.
    #[pyo3(signature = (path, data_files=Vec::new()))]
    fn load_program(&self, py: Python<'_>, path: PathBuf, data_files: Vec<PathBuf>) -> PyResult<PyProgram> {
        let program =
            py.detach(|| Program::open_with_external(&path, &data_files)).map_err(|e| errors::format(&path, &e))?;
        Ok(PyProgram { program: Arc::new(program), rt: self.rt.clone() })
    }
}

/// A parsed program.
#[pyclass(frozen, name = "_Program", module = "etwgpu._etwgpu")]
struct PyProgram {
    program: Arc<Program>,
    rt: Runtime,
}

/// One input or output of a method, as a dict: `dtype` and `shape` (upper
/// bounds when `dynamic`) for tensors, else `kind` (and `value` for
/// constants).
fn value_dict<'py>(py: Python<'py>, v: Option<&PlanValue>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    match v {
        Some(PlanValue::Tensor(t)) => {
            d.set_item("kind", "tensor")?;
            d.set_item("dtype", t.scalar_type.name())?;
            d.set_item("shape", &t.sizes)?;
            d.set_item("dynamic", t.dynamism != Dynamism::Static)?;
        }
        Some(PlanValue::Int(x)) => {
            d.set_item("kind", "int")?;
            d.set_item("value", x)?;
        }
        Some(PlanValue::Bool(x)) => {
            d.set_item("kind", "bool")?;
            d.set_item("value", x)?;
        }
        Some(PlanValue::Double(x)) => {
            d.set_item("kind", "double")?;
            d.set_item("value", x)?;
        }
        Some(other) => d.set_item("kind", other.kind())?,
        None => d.set_item("kind", "missing")?,
    }
    Ok(d)
}

#[pymethods]
impl PyProgram {
    /// The method names, in file order.
    #[getter]
    fn method_names(&self) -> Vec<String> {
        self.program.methods.iter().map(|m| m.name.clone()).collect()
    }

    /// The inputs and outputs of method `name`, as `{"name", "inputs",
    /// "outputs"}` with one [`value_dict`] each.
    fn method_meta<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let Some(m) = self.program.method(name) else {
            let available = self.method_names();
            return Err(errors::Error::new_err(format!("no method {name:?} (methods: {available:?})")));
        };
        let list = |ids: &[usize]| -> PyResult<Bound<'py, PyList>> {
            let l = PyList::empty(py);
            for &i in ids {
                l.append(value_dict(py, m.values.get(i))?)?;
            }
            Ok(l)
        };
        let d = PyDict::new(py);
        d.set_item("name", &m.name)?;
        d.set_item("inputs", list(&m.inputs)?)?;
        d.set_item("outputs", list(&m.outputs)?)?;
        Ok(d)
    }

    /// Loads method `name` on the device: uploads its constants and
    /// compiles its pipelines (the GIL is released meanwhile). `precision`
    /// (`"f32"`, `"mixed"` or `"f16"`; `None`: the runtime's) says which
    /// float32 matrix products may use f16 operands on matrix units.
    #[pyo3(signature = (name, fuse=true, precision=None))]
    fn load_method(&self, py: Python<'_>, name: &str, fuse: bool, precision: Option<&str>) -> PyResult<PyMethod> {
        let options = LoadOptions { fuse, precision: errors::precision(precision)?, ..LoadOptions::default() };
        let method = py.detach(|| self.rt.load_with(&self.program, name, &options)).map_err(|e| errors::runtime(&e))?;
        Ok(PyMethod { method: Mutex::new(method), name: name.to_string(), last_run_ns: AtomicU64::new(0) })
    }
}

/// A loaded method, shared by the threads that call it.
#[pyclass(frozen, name = "_Method", module = "etwgpu._etwgpu")]
struct PyMethod {
    method: Mutex<LoadedMethod>,
    name: String,
    /// Wall time of the last [`LoadedMethod::run`] (what `etwgpu run`
    /// times), nanoseconds: the overhead benchmark's reference.
    last_run_ns: AtomicU64,
}

/// One raw input: an object with a C-contiguous buffer (a numpy array as
/// it is, or a `uint8` view of one), a dtype name (torch's) and a shape.
type RawInput<'py> = (Bound<'py, PyAny>, String, Vec<u64>);

/// One raw output: its bytes, dtype name and shape.
type RawOutput = (Py<Bytes>, &'static str, Vec<u64>);

/// The tensors of `inputs`, each one's bytes copied once, straight out of
/// its buffer (whatever its element format: the dtype name and shape say
/// what the bytes are, and [`Tensor::new`] checks their length).
fn tensors(inputs: &[RawInput<'_>]) -> PyResult<Vec<Tensor>> {
    inputs
        .iter()
        .enumerate()
        .map(|(i, (data, dtype, shape))| {
            let dtype = DType::from_torch_name(dtype).ok_or_else(|| {
                errors::InputError::new_err(format!("input {i}: dtype {dtype} is not one etwgpu can take"))
            })?;
            let buf = PyUntypedBuffer::get(data)
                .map_err(|e| errors::InputError::new_err(format!("input {i}: not a buffer: {e}")))?;
            if !buf.is_c_contiguous() {
                return Err(errors::InputError::new_err(format!("input {i}: its buffer is not C-contiguous")));
            }
            let len = buf.len_bytes();
            let bytes = if len == 0 {
                Vec::new()
            } else {
                // SAFETY: a C-contiguous buffer is `len` bytes from
                // `buf_ptr`, valid while `buf` holds it (until the end of
                // this block); the GIL is held, as for any buffer read.
                unsafe { std::slice::from_raw_parts(buf.buf_ptr().cast::<u8>(), len) }.to_vec()
            };
            Tensor::new(dtype, shape.clone(), bytes)
                .map_err(|e| errors::InputError::new_err(format!("input {i}: {}", errors::chain(&e))))
        })
        .collect()
}

fn outputs(py: Python<'_>, tensors: Vec<Tensor>) -> PyResult<Vec<RawOutput>> {
    tensors.into_iter().map(|t| Ok((Py::new(py, Bytes::new(t.bytes))?, t.dtype.torch_name(), t.shape))).collect()
}

impl PyMethod {
    /// The method, locked. Called with the GIL released, so that a thread
    /// waiting here never blocks the one that holds the lock.
    fn lock(&self) -> PyResult<MutexGuard<'_, LoadedMethod>> {
        self.method.lock().map_err(|_| {
            errors::Error::new_err(format!("method {:?} is unusable: an earlier call panicked", self.name))
        })
    }
}

#[pymethods]
impl PyMethod {
    /// The method's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Runs the method on raw inputs; returns raw outputs. The GIL is
    /// released while the call waits for the method and the GPU.
    fn execute(&self, py: Python<'_>, inputs: Vec<RawInput<'_>>) -> PyResult<Vec<RawOutput>> {
        let inputs = tensors(&inputs)?;
        let result = py.detach(|| {
            self.lock().map(|mut m| {
                let start = Instant::now();
                let result = m.run(&inputs);
                self.last_run_ns.store(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
                result
            })
        })?;
        outputs(py, result.map_err(|e| errors::runtime(&e))?)
    }

    /// Runs once with per-op profiling; returns the outputs and one dict per
    /// op (`call`, `op`, `node_id`, `kernels`, `dispatches`, `ns`,
    /// `gpu_timestamps`).
    fn profile<'py>(
        &self,
        py: Python<'py>,
        inputs: Vec<RawInput<'py>>,
    ) -> PyResult<(Vec<RawOutput>, Bound<'py, PyList>)> {
        let inputs = tensors(&inputs)?;
        let (result, rows) = py.detach(|| {
            self.lock().map(|mut m| {
                m.set_profiling(true);
                let result = m.run(&inputs);
                let rows = m.profile();
                m.set_profiling(false);
                (result, rows)
            })
        })?;
        let outs = outputs(py, result.map_err(|e| errors::runtime(&e))?)?;
        let list = PyList::empty(py);
        for r in rows {
            let d = PyDict::new(py);
            d.set_item("call", r.call)?;
            d.set_item("op", r.op)?;
            d.set_item("node_id", r.node_id)?;
            d.set_item("kernels", r.kernels)?;
            d.set_item("dispatches", r.dispatches)?;
            d.set_item("ns", r.nanos)?;
            d.set_item("gpu_timestamps", r.gpu_timestamps)?;
            list.append(d)?;
        }
        Ok((outs, list))
    }

    /// Seconds the last `execute` spent in the runtime's `run` call (inputs
    /// in, outputs back on the host), the part `etwgpu run` times.
    #[getter]
    fn last_run_s(&self) -> f64 {
        self.last_run_ns.load(Ordering::Relaxed) as f64 * 1e-9
    }

    /// GPU dispatches one call records at the current shapes.
    #[getter]
    fn n_dispatches(&self, py: Python<'_>) -> PyResult<usize> {
        py.detach(|| self.lock().map(|m| m.n_dispatches()))
    }
}

/// The native module.
#[pymodule]
fn _etwgpu(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyRuntime>()?;
    m.add_class::<PyProgram>()?;
    m.add_class::<PyMethod>()?;
    m.add_class::<Bytes>()?;
    m.add_class::<llm::PyLlm>()?;
    m.add_class::<llm::TokenStream>()?;
    m.add("Error", py.get_type::<errors::Error>())?;
    m.add("FormatError", py.get_type::<errors::FormatError>())?;
    m.add("UnsupportedOpError", py.get_type::<errors::UnsupportedOpError>())?;
    m.add("InputError", py.get_type::<errors::InputError>())?;
    m.add("DeviceError", py.get_type::<errors::DeviceError>())?;
    Ok(())
}
