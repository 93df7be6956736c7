/*
 * nvshare wire protocol: framed, versioned messages on a UNIX stream socket.
 *
 * Every message is a 16-byte header followed by `length` payload bytes:
 *
 *   u32 magic   'NVSH' (0x4853564e as little-endian bytes "NVSH")
 *   u16 version NVS_PROTO_VERSION
 *   u16 type    enum nvs_msg_type
 *   u32 length  payload bytes, <= NVS_MAX_PAYLOAD
 *   u32 seq     sender's sequence number (echoed in control replies)
 *
 * All integers are little-endian. Payloads are fixed layouts per type (see
 * docs/protocol.md); strings travel as u16 length + bytes, never NUL-padded
 * arrays, so no fixed-size buffer takes input without a bound.
 *
 * Identity (pid, uid) is never carried: the scheduler reads it from
 * SO_PEERCRED. The pid a client reports in HELLO is informational only (its
 * own pid namespace view).
 */
#ifndef NVSHARE_COMMON_PROTOCOL_H
#define NVSHARE_COMMON_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#define NVS_PROTO_MAGIC 0x4853564eu /* bytes "NVSH" */
#define NVS_PROTO_VERSION 1u
#define NVS_HEADER_SIZE 16u
#define NVS_MAX_PAYLOAD (256u * 1024u)
#define NVS_MAX_STR 4096u
#define NVS_UUID_LEN 96u /* NVML_DEVICE_UUID_V2_BUFFER_SIZE */
/* GPUs one process (client) or one node (scheduler) can use; GPU indexes
 * and client ordinals at or above it are refused on both sides. */
#define NVS_MAX_GPUS 64
/* Idle release: the client gives the lock back after this long without a
 * gated call while someone waits (WELCOME's idle_release_ms; the client's
 * value until WELCOME, and when WELCOME says 0). 20 ms keeps "a waiting job
 * runs within 50 ms of the holder's last kernel" with room for drain and
 * hand-off. docs/client-lock.md "Idle release". */
#define NVS_DEFAULT_IDLE_RELEASE_MS 20u

/* The message types: common/messages.def, the table of every message (its
 * number, who sends it, where the scheduler accepts it, its payload). */
enum nvs_msg_type {
#define NVS_MESSAGE(name, type, from, on, layout) NVS_MSG_##name = type,
#include "messages.def"
};

/* Who sends a message (messages.def's FROM). */
enum nvs_msg_from {
	NVS_FROM_NONE = 0, /* not a message type */
	NVS_FROM_CLIENT,   /* libnvshare.so */
	NVS_FROM_SCHED,	   /* the scheduler */
	NVS_FROM_CTL,	   /* nvsharectl */
};
/* The scheduler sockets a message is accepted on (messages.def). */
#define NVS_ON_CLIENT 0x1u /* the client socket and Pod sockets */
#define NVS_ON_ADMIN 0x2u  /* the admin socket */
enum nvs_msg_from nvs_msg_from(unsigned type);
/* NVS_ON_* or'ed; 0 for what only the scheduler sends, and unknown types. */
unsigned nvs_msg_accepted_on(unsigned type);

/* GPU scheduling modes (NVS_MSG_CTL_SET field MODE, nvsharectl -S). */
enum nvs_mode {
	NVS_MODE_OFF = 0,  /* everyone runs at once */
	NVS_MODE_ON = 1,   /* anti-thrash: one holder at a time */
	NVS_MODE_AUTO = 2, /* together while memory fits, else serialized */
};

/* Settings that nvsharectl can change per GPU. */
enum nvs_ctl_field {
	NVS_CTL_MODE = 1,     /* value: enum nvs_mode */
	NVS_CTL_TQ_MS = 2,    /* value: time quantum in ms */
	NVS_CTL_CAPACITY = 3, /* value: bytes, 0 = GPU memory minus reserve */
	NVS_CTL_IDLE_RELEASE_MS = 4,
};
/* Or'ed into CTL_SET's field: return that setting to its configured value
 * (gpu -1) or GPU gpu to the value for all GPUs; value is ignored
 * (nvsharectl --reset). */
#define NVS_CTL_RESET 0x80000000u

/* GPU_MODE values. 2 is serialized too (clients that predate it treat any
 * nonzero value so): a compute quota runs on the GPU, so every client caps
 * its in-flight work (a holder's drain is a limited client's wait). */
#define NVS_GPU_MODE_CONCURRENT 0u
#define NVS_GPU_MODE_SERIALIZED 1u
#define NVS_GPU_MODE_SERIALIZED_QUOTA 2u

/* Flags in LOCK_OK / DROP_LOCK. */
#define NVS_LOCK_SWAP_IN 0x1u  /* holder should prefetch its ranges to GPU */
#define NVS_LOCK_SWAP_OUT 0x2u /* releaser should move its ranges to host */
/* DROP_LOCK with SWAP_OUT: bits 8..31 of flags are the MiB to move to the
 * host (what the next holder needs beyond the free capacity); 0 = all. */
#define NVS_DROP_SWAP_MIB_SHIFT 8u
#define NVS_DROP_SWAP_MIB_MAX 0xffffffu

/* Bytes as such a MiB field (DROP_LOCK, SWAP_HINT, LOCK_RELEASED): rounded
 * up, at most NVS_DROP_SWAP_MIB_MAX. */
static inline uint32_t nvs_swap_mib(uint64_t bytes)
{
	uint64_t mib = (bytes >> 20) + ((bytes & ((1u << 20) - 1)) != 0);
	return mib > NVS_DROP_SWAP_MIB_MAX ? NVS_DROP_SWAP_MIB_MAX : (uint32_t)mib;
}

/* HELLO flags: what the client understands. */
#define NVS_HELLO_SWAP_HINT 0x1u /* SWAP_HINT (below); others are not sent it */
/* PING / PONG. A scheduler that knows them sends one PONG(0) after WELCOME
 * to a client that set this flag; the client sends PINGs only after that
 * PONG, so an older scheduler never sees a type it would close on. */
#define NVS_HELLO_PING 0x2u
/* The client keeps its device allocations as device memory
 * (NVSHARE_UNIFIED_MEMORY=0): its MEM_UPDATE bytes cannot be swapped out, so
 * a scheduler that knows the flag counts them as pinned when deciding what
 * fits; one that does not ignores it (docs/protocol.md). */
#define NVS_HELLO_DEVICE_MEMORY 0x4u
/* The client's declared class (NVSHARE_PRIORITY, docs/scheduler.md
 * "Co-scheduling"): interactive (short bursts, served first) or batch. At
 * most one is set; neither: the scheduler observes the client. A claim like
 * any HELLO field: the batch floor bounds what an interactive client gets. */
#define NVS_HELLO_PRIO_INTERACTIVE 0x8u
#define NVS_HELLO_PRIO_BATCH 0x10u
/* The client can say which limits it enforces: a scheduler that knows the
 * flag answers HELLO with one LIMITS_ASK, and the client then sends one
 * LIMITS_IN_FORCE per attached GPU whose limits came from SET_LIMITS (a
 * reconnection after a scheduler restart). The scheduler takes them as a
 * claim: the stricter of claimed and configured wins. */
#define NVS_HELLO_LIMITS 0x20u
/* The client can switch to device memory on the scheduler's word: a
 * scheduler that knows the flag sends MEMORY_MODE (value
 * NVS_MEMORY_MODE_DEVICE) right after WELCOME when the process's Pod has the
 * annotation nvshare.com/unified-memory: "false" (or when the annotation
 * appears later). Allocations made after it are device memory, as with
 * NVSHARE_UNIFIED_MEMORY=0; earlier ones stay as they are. */
#define NVS_HELLO_MEMORY_MODE 0x40u
/* The client reports the runs it made without the scheduler's gate (absent,
 * lost, silent): a scheduler that knows the flag answers HELLO with one
 * UNGATED_ASK, and the client then sends one UNGATED per reason with runs
 * to report, now and after each later episode. Statistics only: counted,
 * never believed for anything else. */
#define NVS_HELLO_UNGATED 0x80u
#define NVS_MEMORY_MODE_DEVICE 1u
/* The client can report its bytes per swap path and its host staging
 * (docs/swap.md): a scheduler that knows the flag answers HELLO with one
 * SWAP_PATHS_OK, and only then does the client send SWAP_PATHS (whenever
 * they change), so an older scheduler never sees a type it would close on. */
#define NVS_HELLO_SWAP_PATHS 0x100u

/* LOCK_RELEASED flags. Bit 0: an idle release (not asked). Bits 8..31 (same
 * shift as DROP_LOCK): the MiB an idle release moved to the host, as the
 * last SWAP_HINT asked (0 = none). SWAP_HINT tells the holder, while others
 * wait and memory is short, how much the next holder needs moved out: an
 * idle release then frees that room itself, as a DROP_LOCK with SWAP_OUT
 * would have, instead of leaving the eviction to the driver. */
#define NVS_RELEASED_IDLE 0x1u

/* "No limit" value for limits. */
#define NVS_NO_LIMIT UINT64_MAX

struct nvs_hello {
	uint32_t client_pid; /* informational: pid in the client's namespace */
	uint32_t flags;	     /* NVS_HELLO_* */
	uint32_t core_limit; /* NVSHARE_GPU_CORE_LIMIT, 1..100, 100 = none */
	uint64_t mem_limit;  /* NVSHARE_GPU_MEMORY_LIMIT bytes, NVS_NO_LIMIT */
	char name[256];	     /* program name, for status views */
};

struct nvs_welcome {
	uint32_t client_id; /* scheduler's id for this connection */
	uint32_t idle_release_ms;
};

struct nvs_attach_gpu {
	uint32_t local_gpu;	 /* client's CUDA ordinal; key in later messages */
	uint64_t total_mem;	 /* bytes, as the driver reports */
	uint64_t allocated;	 /* bytes already allocated (re-registration) */
	char uuid[NVS_UUID_LEN]; /* "GPU-xxxxxxxx-..." */
};

/* REQ_LOCK, WAITERS, GPU_MODE, SWAP_HINT, PING, PONG, LIMITS_ASK,
 * MEMORY_MODE, UNGATED_ASK and SWAP_PATHS_OK share this layout. */
struct nvs_gpu_msg {
	uint32_t local_gpu; /* PING, PONG: 0 */
	uint32_t value;	    /* WAITERS: count; GPU_MODE: NVS_GPU_MODE_*; SWAP_HINT: MiB;
			     * PING: a token that PONG echoes */
};

struct nvs_lock_ok {
	uint32_t local_gpu;
	uint32_t flags;	     /* NVS_LOCK_SWAP_IN */
	uint32_t quantum_ms; /* time slice granted, 0 = until asked */
};

struct nvs_drop_lock {
	uint32_t local_gpu;
	uint32_t flags;	   /* NVS_LOCK_SWAP_OUT */
	uint32_t grace_ms; /* release within this or be revoked */
};

struct nvs_lock_released {
	uint32_t local_gpu;
	uint32_t flags;	   /* NVS_RELEASED_IDLE, MiB moved (see above) */
	uint64_t drain_ns; /* time from DROP_LOCK (or idle) to drained */
};

struct nvs_mem_update {
	uint32_t local_gpu;
	uint64_t allocated; /* bytes now allocated on that GPU */
};

struct nvs_swap_stats {
	uint32_t local_gpu;
	uint64_t bytes_in, bytes_out;
	uint64_t ns_in, ns_out;
};

/* SWAP_PATHS: what the client's swap engine does with its memory on one GPU
 * (a claim, shown in the status and metrics; no decision rests on it). */
struct nvs_swap_paths {
	uint32_t local_gpu;
	uint32_t flags;	       /* NVS_SWAP_PATHS_* */
	uint64_t fast;	       /* bytes moved at link speed (converted, VMM) */
	uint64_t prefetch;     /* bytes moved by Unified Memory prefetch */
	uint64_t pinned;       /* bytes that never move */
	uint64_t staging;      /* pinned host staging held for this GPU */
	uint64_t staging_used; /* of which holding swapped-out data now */
};
#define NVS_SWAP_PATHS_PIN_FAILED 0x1u /* pinning was refused: staging stopped growing */
#define NVS_SWAP_PATHS_TRAP 0x2u       /* NVSHARE_SWAP_TRAP=1 (a test mode) */
/* UNGATED: the runs without the scheduler's gate that ended for one reason
 * since the last report, and how long they lasted together. */
enum nvs_ungated_reason {
	NVS_UNGATED_UNREACHABLE = 1,  /* the scheduler's socket could not be reached */
	NVS_UNGATED_LOST = 2,	      /* the connection was lost (closed, an error) */
	NVS_UNGATED_NO_ANSWER = 3,    /* no GPU_MODE within the attach wait */
	NVS_UNGATED_PING_TIMEOUT = 4, /* no answer to a PING (NVSHARE_SCHED_TIMEOUT) */
	NVS_UNGATED_MODE_WAIT = 5,    /* a limited GPU's wait for GPU_MODE ran out */
	NVS_UNGATED_REASONS = 5,
};
struct nvs_ungated {
	uint32_t reason; /* enum nvs_ungated_reason */
	uint32_t runs;
	uint64_t ns; /* total length */
};

/* SET_LIMITS and LIMITS_IN_FORCE. */
struct nvs_set_limits {
	uint32_t local_gpu;
	uint32_t core_limit; /* 1..100 */
	uint64_t mem_limit;  /* bytes or NVS_NO_LIMIT */
};

struct nvs_ctl_set {
	int32_t gpu;	/* GPU index, -1 = all */
	uint32_t field; /* enum nvs_ctl_field */
	uint64_t value;
};

struct nvs_ctl_set_client {
	uint32_t pid;	     /* host pid of the client */
	int32_t gpu;	     /* GPU index, -1 = all its GPUs */
	uint32_t core_limit; /* 0 = unchanged, 1..100 */
	uint32_t flags;	     /* NVS_CTL_CLIENT_* */
	uint64_t mem_limit;  /* bytes; see flags */
};
#define NVS_CTL_CLIENT_SET_MEM 0x1u    /* mem_limit is meaningful */
#define NVS_CTL_CLIENT_CLEAR_CORE 0x2u /* drop run-time core override */

/* CTL_STATUS flags. STREAM: the reply may come in several CTL_REPLY
 * frames of the request's seq, each but the last with status
 * NVS_CTL_REPLY_MORE; the text is their concatenation. Without it a status
 * larger than one frame is refused with -E2BIG (older nvsharectl). */
#define NVS_CTL_STATUS_STREAM 0x1u
#define NVS_CTL_REPLY_MORE 1

struct nvs_ctl_status {
	uint32_t flags; /* NVS_CTL_STATUS_* */
};

struct nvs_msg {
	uint16_t type;
	uint32_t seq;
	union {
		struct nvs_hello hello;
		struct nvs_welcome welcome;
		struct nvs_attach_gpu attach;
		struct nvs_gpu_msg gpu;
		struct nvs_lock_ok lock_ok;
		struct nvs_drop_lock drop;
		struct nvs_lock_released released;
		struct nvs_mem_update mem;
		struct nvs_swap_stats swap;
		struct nvs_swap_paths paths;
		struct nvs_set_limits limits;
		struct nvs_ungated ungated;
		struct nvs_ctl_set ctl_set;
		struct nvs_ctl_set_client ctl_client;
		struct nvs_ctl_status ctl_status;
	} u;
	/* CTL_REPLY keeps its text out of the union: it is large. */
	int32_t reply_status;
	const char *reply_text; /* encode: borrowed; decode: points into buf */
	uint32_t reply_len;
};

enum nvs_decode_result {
	NVS_DECODE_OK = 0,	  /* one message decoded, *consumed set */
	NVS_DECODE_NEED_MORE = 1, /* incomplete frame: read more */
	NVS_DECODE_BAD = -1,	  /* malformed: close the connection */
};

/*
 * Encode `m` into buf (cap bytes). Returns the frame length, or 0 when it does
 * not fit or the message is invalid.
 */
size_t nvs_msg_encode(const struct nvs_msg *m, uint8_t *buf, size_t cap);

/*
 * Decode one frame from buf[0..len). On NVS_DECODE_OK sets *consumed to the
 * frame length. A CTL_REPLY's reply_text points into buf (not NUL-terminated;
 * use reply_len).
 */
enum nvs_decode_result nvs_msg_decode(const uint8_t *buf, size_t len, struct nvs_msg *m,
				      size_t *consumed);

/* A HELLO from this process (pid from getpid(), informational) and an
 * ATTACH_GPU: the two registration messages every client sends. */
void nvs_msg_hello(struct nvs_msg *m, const char *name, uint32_t core_limit, uint64_t mem_limit);
void nvs_msg_attach(struct nvs_msg *m, uint32_t local_gpu, const char *uuid, uint64_t total_mem,
		    uint64_t allocated);
/* The messages of struct nvs_gpu_msg's layout (REQ_LOCK, WAITERS, GPU_MODE,
 * SWAP_HINT), and LOCK_RELEASED. */
void nvs_msg_gpu(struct nvs_msg *m, uint16_t type, uint32_t local_gpu, uint32_t value);
void nvs_msg_released(struct nvs_msg *m, uint32_t local_gpu, uint32_t flags, uint64_t drain_ns);

const char *nvs_msg_type_name(unsigned type);
/* "unreachable", "lost", "no-answer", "ping-timeout", "mode-wait" for
 * enum nvs_ungated_reason; "?" otherwise. */
const char *nvs_ungated_reason_name(unsigned reason);
const char *nvs_mode_name(unsigned mode);
/* Parses "on", "off", "auto" (also 1/0). Returns -1 if unknown. */
int nvs_mode_parse(const char *s);

#endif
