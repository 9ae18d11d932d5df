package sim

// Driver, cuBLAS and NVRTC entry point names, one per Backend method. Errors carry them in
// their Op field and [Device.InjectFault] selects the call to fail by them.
const (
	OpInit                = "cuInit"
	OpDriverVersion       = "cuDriverGetVersion"
	OpDeviceCount         = "cuDeviceGetCount"
	OpDeviceName          = "cuDeviceGetName"
	OpDeviceAttribute     = "cuDeviceGetAttribute"
	OpDeviceTotalMem      = "cuDeviceTotalMem_v2"
	OpPrimaryCtxRetain    = "cuDevicePrimaryCtxRetain"
	OpPrimaryCtxRelease   = "cuDevicePrimaryCtxRelease_v2"
	OpCtxSetCurrent       = "cuCtxSetCurrent"
	OpCtxGetCurrent       = "cuCtxGetCurrent"
	OpCtxSynchronize      = "cuCtxSynchronize"
	OpMemGetInfo          = "cuMemGetInfo_v2"
	OpStreamPriorityRange = "cuCtxGetStreamPriorityRange"
	OpDeviceCanAccessPeer = "cuDeviceCanAccessPeer"
	OpCtxEnablePeerAccess = "cuCtxEnablePeerAccess"

	OpStreamCreate       = "cuStreamCreateWithPriority"
	OpStreamDestroy      = "cuStreamDestroy_v2"
	OpStreamSynchronize  = "cuStreamSynchronize"
	OpStreamQuery        = "cuStreamQuery"
	OpStreamWaitEvent    = "cuStreamWaitEvent"
	OpStreamWriteValue32 = "cuStreamWriteValue32_v2"

	OpEventCreate      = "cuEventCreate"
	OpEventDestroy     = "cuEventDestroy_v2"
	OpEventRecord      = "cuEventRecord"
	OpEventQuery       = "cuEventQuery"
	OpEventSynchronize = "cuEventSynchronize"
	OpEventElapsedTime = "cuEventElapsedTime_v2"

	OpMemAlloc                = "cuMemAlloc_v2"
	OpMemFree                 = "cuMemFree_v2"
	OpMemHostAlloc            = "cuMemHostAlloc"
	OpMemFreeHost             = "cuMemFreeHost"
	OpMemHostRegister         = "cuMemHostRegister_v2"
	OpMemHostUnregister       = "cuMemHostUnregister"
	OpMemHostGetDevicePointer = "cuMemHostGetDevicePointer_v2"
	OpMemcpyHtoD              = "cuMemcpyHtoD_v2"
	OpMemcpyDtoH              = "cuMemcpyDtoH_v2"
	OpMemcpyDtoD              = "cuMemcpyDtoD_v2"
	OpMemcpyHtoDAsync         = "cuMemcpyHtoDAsync_v2"
	OpMemcpyDtoHAsync         = "cuMemcpyDtoHAsync_v2"
	OpMemcpyDtoDAsync         = "cuMemcpyDtoDAsync_v2"
	OpMemcpyPeerAsync         = "cuMemcpyPeerAsync"
	OpMemsetD8                = "cuMemsetD8_v2"
	OpMemsetD8Async           = "cuMemsetD8Async"
	OpMemsetD32Async          = "cuMemsetD32Async"

	OpModuleLoadData    = "cuModuleLoadData"
	OpModuleUnload      = "cuModuleUnload"
	OpModuleGetFunction = "cuModuleGetFunction"
	OpLaunchKernel      = "cuLaunchKernel"

	OpStreamBeginCapture  = "cuStreamBeginCapture_v2"
	OpStreamEndCapture    = "cuStreamEndCapture"
	OpStreamCaptureStatus = "cuStreamIsCapturing"
	OpGraphNodeCount      = "cuGraphGetNodes"
	OpGraphInstantiate    = "cuGraphInstantiateWithFlags"
	OpGraphUpload         = "cuGraphUpload"
	OpGraphLaunch         = "cuGraphLaunch"
	OpGraphExecUpdate     = "cuGraphExecUpdate_v2"
	OpGraphExecDestroy    = "cuGraphExecDestroy"
	OpGraphDestroy        = "cuGraphDestroy"

	OpBLASCreate           = "cublasCreate_v2"
	OpBLASDestroy          = "cublasDestroy_v2"
	OpBLASSetStream        = "cublasSetStream_v2"
	OpBLASSetMathMode      = "cublasSetMathMode"
	OpSgemm                = "cublasSgemm_v2"
	OpSgemmStridedBatched  = "cublasSgemmStridedBatched"
	OpGemmEx               = "cublasGemmEx"
	OpGemmStridedBatchedEx = "cublasGemmStridedBatchedEx"
	OpCompilePTX           = "nvrtcCompileProgram"
)

// opNames lists every name above; InjectFault accepts only these.
var opNames = map[string]bool{
	OpInit: true, OpDriverVersion: true, OpDeviceCount: true, OpDeviceName: true,
	OpDeviceAttribute: true, OpDeviceTotalMem: true, OpPrimaryCtxRetain: true,
	OpPrimaryCtxRelease: true, OpCtxSetCurrent: true, OpCtxGetCurrent: true,
	OpCtxSynchronize: true, OpMemGetInfo: true, OpStreamPriorityRange: true,
	OpDeviceCanAccessPeer: true, OpCtxEnablePeerAccess: true, OpMemcpyPeerAsync: true,
	OpStreamCreate: true, OpStreamDestroy: true, OpStreamSynchronize: true,
	OpStreamQuery: true, OpStreamWaitEvent: true, OpStreamWriteValue32: true,
	OpEventCreate: true, OpEventDestroy: true, OpEventRecord: true, OpEventQuery: true,
	OpEventSynchronize: true, OpEventElapsedTime: true,
	OpMemAlloc: true, OpMemFree: true, OpMemHostAlloc: true, OpMemFreeHost: true,
	OpMemHostRegister: true, OpMemHostUnregister: true, OpMemHostGetDevicePointer: true, OpMemcpyHtoD: true,
	OpMemcpyDtoH: true, OpMemcpyDtoD: true, OpMemcpyHtoDAsync: true, OpMemcpyDtoHAsync: true,
	OpMemcpyDtoDAsync: true, OpMemsetD8: true, OpMemsetD8Async: true, OpMemsetD32Async: true,
	OpModuleLoadData: true, OpModuleUnload: true, OpModuleGetFunction: true,
	OpLaunchKernel:       true,
	OpStreamBeginCapture: true, OpStreamEndCapture: true, OpStreamCaptureStatus: true,
	OpGraphNodeCount: true, OpGraphInstantiate: true, OpGraphUpload: true,
	OpGraphLaunch: true, OpGraphExecUpdate: true, OpGraphExecDestroy: true,
	OpGraphDestroy: true,
	OpBLASCreate:   true, OpBLASDestroy: true, OpBLASSetStream: true, OpBLASSetMathMode: true,
	OpSgemm: true, OpSgemmStridedBatched: true, OpGemmEx: true, OpGemmStridedBatchedEx: true,
	OpCompilePTX: true,
}

// blasOps are the entry points whose failures are *cudadrv.BLASError.
var blasOps = map[string]bool{
	OpBLASCreate: true, OpBLASDestroy: true, OpBLASSetStream: true, OpBLASSetMathMode: true,
	OpSgemm: true, OpSgemmStridedBatched: true, OpGemmEx: true, OpGemmStridedBatchedEx: true,
}
