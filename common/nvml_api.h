/*
 * The few NVML types and functions nvshare uses. The CUDA toolkit ships no
 * nvml.h, so we declare the ABI ourselves (layouts as in NVML's public
 * header; every struct here is part of the stable driver ABI). Nothing links
 * libnvidia-ml: the scheduler dlopen()s "libnvidia-ml.so.1", the client wraps
 * the functions the application looks up.
 */
#ifndef NVSHARE_COMMON_NVML_API_H
#define NVSHARE_COMMON_NVML_API_H

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NO_PERMISSION 4
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25
#define NVML_ERROR_UNKNOWN 999

typedef struct nvmlDevice_st *nvmlDevice_t;

#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96

typedef struct {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_t;

typedef struct {
	unsigned int version; /* nvmlMemory_v2 */
	unsigned long long total;
	unsigned long long reserved;
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_v2_t;

#define NVML_STRUCT_VERSION(size, ver) ((unsigned int)(size) | ((unsigned int)(ver) << 24U))
#define nvmlMemory_v2 NVML_STRUCT_VERSION(sizeof(nvmlMemory_v2_t), 2)

typedef struct {
	unsigned int gpu;    /* percent of time a kernel ran, last sample period */
	unsigned int memory; /* percent of time memory was read or written */
} nvmlUtilization_t;

/* nvmlDeviceGetComputeRunningProcesses (v1). */
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

/* _v2 and _v3 of the process queries use this layout. */
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

typedef struct {
	unsigned int pid;
	unsigned long long timeStamp;
	unsigned int smUtil;
	unsigned int memUtil;
	unsigned int encUtil;
	unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

typedef nvmlReturn_t (*nvs_pfn_nvmlInit_v2)(void);
typedef nvmlReturn_t (*nvs_pfn_nvmlShutdown)(void);
typedef const char *(*nvs_pfn_nvmlErrorString)(nvmlReturn_t);
typedef nvmlReturn_t (*nvs_pfn_nvmlDeviceGetCount_v2)(unsigned int *);
typedef nvmlReturn_t (*nvs_pfn_nvmlDeviceGetHandleByIndex_v2)(unsigned int, nvmlDevice_t *);
typedef nvmlReturn_t (*nvs_pfn_nvmlDeviceGetHandleByUUID)(const char *, nvmlDevice_t *);
typedef nvmlReturn_t (*nvs_pfn_nvmlDeviceGetIndex)(nvmlDevice_t, unsigned int *);
typedef nvmlReturn_t (*nvs_pfn_nvmlDeviceGetUUID)(nvmlDevice_t, char *, unsigned int);
typedef nvmlReturn_t (*nvs_pfn_nvmlDeviceGetName)(nvmlDevice_t, char *, unsigned int);
typedef nvmlReturn_t (*nvs_pfn_nvmlDeviceGetMinorNumber)(nvmlDevice_t, unsigned int *);
typedef nvmlReturn_t (*nvs_pfn_nvmlDeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t *);
typedef nvmlReturn_t (*nvs_pfn_nvmlDeviceGetMemoryInfo_v2)(nvmlDevice_t, nvmlMemory_v2_t *);
typedef nvmlReturn_t (*nvs_pfn_nvmlDeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t *);
typedef nvmlReturn_t (*nvs_pfn_nvmlDeviceGetComputeRunningProcesses)(nvmlDevice_t, unsigned int *,
								     nvmlProcessInfo_v1_t *);
typedef nvmlReturn_t (*nvs_pfn_nvmlDeviceGetComputeRunningProcesses_v3)(nvmlDevice_t,
									unsigned int *,
									nvmlProcessInfo_v2_t *);
typedef nvmlReturn_t (*nvs_pfn_nvmlDeviceGetProcessUtilization)(nvmlDevice_t,
								nvmlProcessUtilizationSample_t *,
								unsigned int *, unsigned long long);

#endif
