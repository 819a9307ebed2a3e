//! Wrappers: stream capture and graphs. Handles passed in are live: the callers hold their
//! brand (`graph/`).

use std::ffi::c_int;

use super::{CUgraph, CUgraphExec, CUgraphExecUpdateResultInfo, CUstream};
use crate::error::{Error, ErrorCode, Result};

/// `CU_STREAM_CAPTURE_MODE_RELAXED`: the capture prohibits no API call of any thread (see
/// `graph/` for why the crate captures in this mode).
pub(crate) const CAPTURE_MODE_RELAXED: c_int = 2;

/// Starts capturing the work queued on `s` into a graph.
///
/// # Safety
/// `s` is live and not capturing.
#[inline]
pub(crate) unsafe fn stream_begin_capture(s: CUstream, mode: c_int) -> Result<()> {
    cu!(cuStreamBeginCapture_v2(s, mode))
}

/// Ends the capture on `s`: the graph, or null if the capture was invalidated.
///
/// # Safety
/// `s` is live and capturing.
#[inline]
pub(crate) unsafe fn stream_end_capture(s: CUstream) -> Result<CUgraph> {
    let mut g = std::ptr::null_mut();
    cu!(cuStreamEndCapture(s, &mut g))?;
    Ok(g)
}

/// The number of nodes of `g`.
///
/// # Safety
/// `g` is live.
#[inline]
pub(crate) unsafe fn graph_node_count(g: CUgraph) -> Result<usize> {
    let mut n = 0;
    cu!(cuGraphGetNodes(g, std::ptr::null_mut(), &mut n))?;
    Ok(n)
}

/// Instantiates `g` (no flags).
///
/// # Safety
/// `g` is live.
#[inline]
pub(crate) unsafe fn graph_instantiate(g: CUgraph) -> Result<CUgraphExec> {
    let mut e = std::ptr::null_mut();
    cu!(cuGraphInstantiateWithFlags(&mut e, g, 0))?;
    Ok(e)
}

/// # Safety
/// `g` is a graph this crate made and nothing uses it afterwards.
#[inline]
pub(crate) unsafe fn graph_destroy(g: CUgraph) -> Result<()> {
    cu!(cuGraphDestroy(g))
}

/// # Safety
/// `e` is an executable graph this crate made and nothing uses it afterwards (a launch
/// still running completes first: the driver frees it then).
#[inline]
pub(crate) unsafe fn graph_exec_destroy(e: CUgraphExec) -> Result<()> {
    cu!(cuGraphExecDestroy(e))
}

/// # Safety
/// `e` and `s` are live and of one context; every memory the graph reaches stays valid
/// until the stream has run it.
#[inline]
pub(crate) unsafe fn graph_launch(e: CUgraphExec, s: CUstream) -> Result<()> {
    cu!(cuGraphLaunch(e, s))
}

/// Updates `e` with the parameters of `g` (`cuGraphExecUpdate_v2`, CUDA 12.0). On
/// `CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE` the driver did not perform the update; the
/// error's detail names the reason it gave.
///
/// # Safety
/// `e` and `g` are live, and no launch of `e` is pending.
#[inline]
pub(crate) unsafe fn graph_exec_update(e: CUgraphExec, g: CUgraph) -> Result<()> {
    let mut info = CUgraphExecUpdateResultInfo {
        result: 0,
        errorNode: std::ptr::null_mut(),
        errorFromNode: std::ptr::null_mut(),
    };
    match cu!(cuGraphExecUpdate_v2(e, g, &mut info)) {
        Ok(()) => Ok(()),
        Err(error) if error.code() == ErrorCode::GraphExecUpdateFailure => {
            let why = match info.result {
                1 => "CU_GRAPH_EXEC_UPDATE_ERROR",
                2 => "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED",
                3 => "CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED",
                4 => "CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED",
                5 => "CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED",
                6 => "CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED",
                7 => "CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE",
                8 => "CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED",
                _ => "an update result this crate does not know",
            };
            Err(Error::with_detail(
                "cuGraphExecUpdate_v2",
                ErrorCode::GraphExecUpdateFailure,
                format!(
                    "the driver did not update the executable graph: {why} ({})",
                    info.result
                ),
            ))
        }
        Err(error) => Err(error),
    }
}
