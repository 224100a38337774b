//! Execution planning for etwgpu: shapes, memory planning, fusion (filled in by the planning work).
