/*
 * Encoding and decoding of nvshare protocol frames. Every read is bounds
 * checked against the frame length; a payload whose size does not match its
 * type exactly is rejected, so a peer cannot make us read past its frame.
 */
#include "protocol.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- little-endian writer / reader with bounds ---- */

struct wr {
	uint8_t *p;
	size_t cap, off;
	int bad;
};

static void put(struct wr *w, uint64_t v, unsigned n)
{
	if (w->bad || w->cap - w->off < n) {
		w->bad = 1;
		return;
	}
	for (unsigned i = 0; i < n; i++)
		w->p[w->off++] = (uint8_t)(v >> (8 * i));
}

static void put_str(struct wr *w, const char *s)
{
	size_t n = strnlen(s, NVS_MAX_STR);
	put(w, n, 2);
	if (w->bad || w->cap - w->off < n) {
		w->bad = 1;
		return;
	}
	memcpy(w->p + w->off, s, n);
	w->off += n;
}

struct rd {
	const uint8_t *p;
	size_t len, off;
	int bad;
};

static uint64_t get(struct rd *r, unsigned n)
{
	uint64_t v = 0;
	if (r->bad || r->len - r->off < n) {
		r->bad = 1;
		return 0;
	}
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)r->p[r->off++] << (8 * i);
	return v;
}

/* Reads a u16-length string into dst (cap bytes, always NUL-terminated). */
static void get_str(struct rd *r, char *dst, size_t cap)
{
	size_t n = (size_t)get(r, 2);
	if (r->bad || r->len - r->off < n || n >= cap) {
		r->bad = 1;
		dst[0] = '\0';
		return;
	}
	memcpy(dst, r->p + r->off, n);
	dst[n] = '\0';
	/* Embedded NULs would make the string lie about its length. */
	if (memchr(dst, '\0', n))
		r->bad = 1;
	r->off += n;
}

#define U32(x) put(w, (uint32_t)(x), 4)
#define U64(x) put(w, (uint64_t)(x), 8)

static void encode_payload(const struct nvs_msg *m, struct wr *w)
{
	switch (m->type) {
	case NVS_MSG_HELLO:
		U32(m->u.hello.client_pid);
		U32(m->u.hello.flags);
		U32(m->u.hello.core_limit);
		U64(m->u.hello.mem_limit);
		put_str(w, m->u.hello.name);
		break;
	case NVS_MSG_WELCOME:
		U32(m->u.welcome.client_id);
		U32(m->u.welcome.idle_release_ms);
		break;
	case NVS_MSG_ATTACH_GPU:
		U32(m->u.attach.local_gpu);
		U64(m->u.attach.total_mem);
		U64(m->u.attach.allocated);
		put_str(w, m->u.attach.uuid);
		break;
	case NVS_MSG_REQ_LOCK:
	case NVS_MSG_WAITERS:
	case NVS_MSG_GPU_MODE:
	case NVS_MSG_SWAP_HINT:
	case NVS_MSG_PING:
	case NVS_MSG_PONG:
	case NVS_MSG_LIMITS_ASK:
	case NVS_MSG_MEMORY_MODE:
	case NVS_MSG_UNGATED_ASK:
	case NVS_MSG_SWAP_PATHS_OK:
		U32(m->u.gpu.local_gpu);
		U32(m->u.gpu.value);
		break;
	case NVS_MSG_UNGATED:
		U32(m->u.ungated.reason);
		U32(m->u.ungated.runs);
		U64(m->u.ungated.ns);
		break;
	case NVS_MSG_LOCK_OK:
		U32(m->u.lock_ok.local_gpu);
		U32(m->u.lock_ok.flags);
		U32(m->u.lock_ok.quantum_ms);
		break;
	case NVS_MSG_DROP_LOCK:
		U32(m->u.drop.local_gpu);
		U32(m->u.drop.flags);
		U32(m->u.drop.grace_ms);
		break;
	case NVS_MSG_LOCK_RELEASED:
		U32(m->u.released.local_gpu);
		U32(m->u.released.flags);
		U64(m->u.released.drain_ns);
		break;
	case NVS_MSG_MEM_UPDATE:
		U32(m->u.mem.local_gpu);
		U64(m->u.mem.allocated);
		break;
	case NVS_MSG_SWAP_STATS:
		U32(m->u.swap.local_gpu);
		U64(m->u.swap.bytes_in);
		U64(m->u.swap.bytes_out);
		U64(m->u.swap.ns_in);
		U64(m->u.swap.ns_out);
		break;
	case NVS_MSG_SWAP_PATHS:
		U32(m->u.paths.local_gpu);
		U32(m->u.paths.flags);
		U64(m->u.paths.fast);
		U64(m->u.paths.prefetch);
		U64(m->u.paths.pinned);
		U64(m->u.paths.staging);
		U64(m->u.paths.staging_used);
		break;
	case NVS_MSG_SET_LIMITS:
	case NVS_MSG_LIMITS_IN_FORCE:
		U32(m->u.limits.local_gpu);
		U32(m->u.limits.core_limit);
		U64(m->u.limits.mem_limit);
		break;
	case NVS_MSG_CTL_SET:
		U32((uint32_t)m->u.ctl_set.gpu);
		U32(m->u.ctl_set.field);
		U64(m->u.ctl_set.value);
		break;
	case NVS_MSG_CTL_SET_CLIENT:
		U32(m->u.ctl_client.pid);
		U32((uint32_t)m->u.ctl_client.gpu);
		U32(m->u.ctl_client.core_limit);
		U32(m->u.ctl_client.flags);
		U64(m->u.ctl_client.mem_limit);
		break;
	case NVS_MSG_CTL_STATUS:
		U32(m->u.ctl_status.flags);
		break;
	case NVS_MSG_CTL_REPLY:
		U32((uint32_t)m->reply_status);
		U32(m->reply_len);
		if (!w->bad && m->reply_len <= w->cap - w->off &&
		    m->reply_len <= NVS_MAX_PAYLOAD - 8) {
			if (m->reply_len)
				memcpy(w->p + w->off, m->reply_text, m->reply_len);
			w->off += m->reply_len;
		} else {
			w->bad = 1;
		}
		break;
	default:
		w->bad = 1;
	}
}

size_t nvs_msg_encode(const struct nvs_msg *m, uint8_t *buf, size_t cap)
{
	struct wr w = {buf, cap, 0, 0};
	put(&w, NVS_PROTO_MAGIC, 4);
	put(&w, NVS_PROTO_VERSION, 2);
	put(&w, m->type, 2);
	put(&w, 0, 4); /* length, patched below */
	put(&w, m->seq, 4);
	if (w.bad)
		return 0;
	encode_payload(m, &w);
	if (w.bad || w.off - NVS_HEADER_SIZE > NVS_MAX_PAYLOAD)
		return 0;
	uint32_t len = (uint32_t)(w.off - NVS_HEADER_SIZE);
	for (unsigned i = 0; i < 4; i++)
		buf[8 + i] = (uint8_t)(len >> (8 * i));
	return w.off;
}

static void decode_payload(struct nvs_msg *m, struct rd *r)
{
	switch (m->type) {
	case NVS_MSG_HELLO:
		m->u.hello.client_pid = (uint32_t)get(r, 4);
		m->u.hello.flags = (uint32_t)get(r, 4);
		m->u.hello.core_limit = (uint32_t)get(r, 4);
		m->u.hello.mem_limit = get(r, 8);
		get_str(r, m->u.hello.name, sizeof m->u.hello.name);
		break;
	case NVS_MSG_WELCOME:
		m->u.welcome.client_id = (uint32_t)get(r, 4);
		m->u.welcome.idle_release_ms = (uint32_t)get(r, 4);
		break;
	case NVS_MSG_ATTACH_GPU:
		m->u.attach.local_gpu = (uint32_t)get(r, 4);
		m->u.attach.total_mem = get(r, 8);
		m->u.attach.allocated = get(r, 8);
		get_str(r, m->u.attach.uuid, sizeof m->u.attach.uuid);
		break;
	case NVS_MSG_REQ_LOCK:
	case NVS_MSG_WAITERS:
	case NVS_MSG_GPU_MODE:
	case NVS_MSG_SWAP_HINT:
	case NVS_MSG_PING:
	case NVS_MSG_PONG:
	case NVS_MSG_LIMITS_ASK:
	case NVS_MSG_MEMORY_MODE:
	case NVS_MSG_UNGATED_ASK:
	case NVS_MSG_SWAP_PATHS_OK:
		m->u.gpu.local_gpu = (uint32_t)get(r, 4);
		m->u.gpu.value = (uint32_t)get(r, 4);
		break;
	case NVS_MSG_UNGATED:
		m->u.ungated.reason = (uint32_t)get(r, 4);
		m->u.ungated.runs = (uint32_t)get(r, 4);
		m->u.ungated.ns = get(r, 8);
		break;
	case NVS_MSG_LOCK_OK:
		m->u.lock_ok.local_gpu = (uint32_t)get(r, 4);
		m->u.lock_ok.flags = (uint32_t)get(r, 4);
		m->u.lock_ok.quantum_ms = (uint32_t)get(r, 4);
		break;
	case NVS_MSG_DROP_LOCK:
		m->u.drop.local_gpu = (uint32_t)get(r, 4);
		m->u.drop.flags = (uint32_t)get(r, 4);
		m->u.drop.grace_ms = (uint32_t)get(r, 4);
		break;
	case NVS_MSG_LOCK_RELEASED:
		m->u.released.local_gpu = (uint32_t)get(r, 4);
		m->u.released.flags = (uint32_t)get(r, 4);
		m->u.released.drain_ns = get(r, 8);
		break;
	case NVS_MSG_MEM_UPDATE:
		m->u.mem.local_gpu = (uint32_t)get(r, 4);
		m->u.mem.allocated = get(r, 8);
		break;
	case NVS_MSG_SWAP_STATS:
		m->u.swap.local_gpu = (uint32_t)get(r, 4);
		m->u.swap.bytes_in = get(r, 8);
		m->u.swap.bytes_out = get(r, 8);
		m->u.swap.ns_in = get(r, 8);
		m->u.swap.ns_out = get(r, 8);
		break;
	case NVS_MSG_SWAP_PATHS:
		m->u.paths.local_gpu = (uint32_t)get(r, 4);
		m->u.paths.flags = (uint32_t)get(r, 4);
		m->u.paths.fast = get(r, 8);
		m->u.paths.prefetch = get(r, 8);
		m->u.paths.pinned = get(r, 8);
		m->u.paths.staging = get(r, 8);
		m->u.paths.staging_used = get(r, 8);
		break;
	case NVS_MSG_SET_LIMITS:
	case NVS_MSG_LIMITS_IN_FORCE:
		m->u.limits.local_gpu = (uint32_t)get(r, 4);
		m->u.limits.core_limit = (uint32_t)get(r, 4);
		m->u.limits.mem_limit = get(r, 8);
		break;
	case NVS_MSG_CTL_SET:
		m->u.ctl_set.gpu = (int32_t)(uint32_t)get(r, 4);
		m->u.ctl_set.field = (uint32_t)get(r, 4);
		m->u.ctl_set.value = get(r, 8);
		break;
	case NVS_MSG_CTL_SET_CLIENT:
		m->u.ctl_client.pid = (uint32_t)get(r, 4);
		m->u.ctl_client.gpu = (int32_t)(uint32_t)get(r, 4);
		m->u.ctl_client.core_limit = (uint32_t)get(r, 4);
		m->u.ctl_client.flags = (uint32_t)get(r, 4);
		m->u.ctl_client.mem_limit = get(r, 8);
		break;
	case NVS_MSG_CTL_STATUS:
		m->u.ctl_status.flags = (uint32_t)get(r, 4);
		break;
	case NVS_MSG_CTL_REPLY:
		m->reply_status = (int32_t)(uint32_t)get(r, 4);
		m->reply_len = (uint32_t)get(r, 4);
		if (r->bad || r->len - r->off < m->reply_len) {
			r->bad = 1;
			break;
		}
		m->reply_text = (const char *)r->p + r->off;
		r->off += m->reply_len;
		break;
	default:
		r->bad = 1; /* unknown type: the connection is closed */
	}
}

enum nvs_decode_result nvs_msg_decode(const uint8_t *buf, size_t len, struct nvs_msg *m,
				      size_t *consumed)
{
	if (len < NVS_HEADER_SIZE) {
		/* Reject garbage early when the bytes we have already disagree
		 * with the magic, rather than waiting for a full header. */
		static const uint8_t magic[4] = {'N', 'V', 'S', 'H'};
		size_t n = len < 4 ? len : 4;
		return memcmp(buf, magic, n) ? NVS_DECODE_BAD : NVS_DECODE_NEED_MORE;
	}
	struct rd h = {buf, NVS_HEADER_SIZE, 0, 0};
	uint32_t magic = (uint32_t)get(&h, 4);
	uint16_t version = (uint16_t)get(&h, 2);
	uint16_t type = (uint16_t)get(&h, 2);
	uint32_t plen = (uint32_t)get(&h, 4);
	uint32_t seq = (uint32_t)get(&h, 4);
	if (magic != NVS_PROTO_MAGIC || version != NVS_PROTO_VERSION || plen > NVS_MAX_PAYLOAD)
		return NVS_DECODE_BAD;
	if (len - NVS_HEADER_SIZE < plen)
		return NVS_DECODE_NEED_MORE;

	memset(m, 0, sizeof *m);
	m->type = type;
	m->seq = seq;
	struct rd r = {buf + NVS_HEADER_SIZE, plen, 0, 0};
	decode_payload(m, &r);
	if (r.bad || r.off != plen) /* trailing bytes are malformed too */
		return NVS_DECODE_BAD;
	*consumed = NVS_HEADER_SIZE + plen;
	return NVS_DECODE_OK;
}

void nvs_msg_hello(struct nvs_msg *m, const char *name, uint32_t core_limit, uint64_t mem_limit)
{
	memset(m, 0, sizeof *m);
	m->type = NVS_MSG_HELLO;
	m->u.hello.client_pid = (uint32_t)getpid();
	m->u.hello.core_limit = core_limit;
	m->u.hello.mem_limit = mem_limit;
	snprintf(m->u.hello.name, sizeof m->u.hello.name, "%s", name);
}

void nvs_msg_attach(struct nvs_msg *m, uint32_t local_gpu, const char *uuid, uint64_t total_mem,
		    uint64_t allocated)
{
	memset(m, 0, sizeof *m);
	m->type = NVS_MSG_ATTACH_GPU;
	m->u.attach.local_gpu = local_gpu;
	m->u.attach.total_mem = total_mem;
	m->u.attach.allocated = allocated;
	snprintf(m->u.attach.uuid, sizeof m->u.attach.uuid, "%s", uuid);
}

void nvs_msg_gpu(struct nvs_msg *m, uint16_t type, uint32_t local_gpu, uint32_t value)
{
	memset(m, 0, sizeof *m);
	m->type = type;
	m->u.gpu.local_gpu = local_gpu;
	m->u.gpu.value = value;
}

void nvs_msg_released(struct nvs_msg *m, uint32_t local_gpu, uint32_t flags, uint64_t drain_ns)
{
	memset(m, 0, sizeof *m);
	m->type = NVS_MSG_LOCK_RELEASED;
	m->u.released.local_gpu = local_gpu;
	m->u.released.flags = flags;
	m->u.released.drain_ns = drain_ns;
}

const char *nvs_msg_type_name(unsigned type)
{
	switch (type) {
	case NVS_MSG_HELLO:
		return "HELLO";
	case NVS_MSG_ATTACH_GPU:
		return "ATTACH_GPU";
	case NVS_MSG_REQ_LOCK:
		return "REQ_LOCK";
	case NVS_MSG_LOCK_RELEASED:
		return "LOCK_RELEASED";
	case NVS_MSG_MEM_UPDATE:
		return "MEM_UPDATE";
	case NVS_MSG_SWAP_STATS:
		return "SWAP_STATS";
	case NVS_MSG_SWAP_PATHS:
		return "SWAP_PATHS";
	case NVS_MSG_SWAP_PATHS_OK:
		return "SWAP_PATHS_OK";
	case NVS_MSG_LOCK_OK:
		return "LOCK_OK";
	case NVS_MSG_DROP_LOCK:
		return "DROP_LOCK";
	case NVS_MSG_GPU_MODE:
		return "GPU_MODE";
	case NVS_MSG_SET_LIMITS:
		return "SET_LIMITS";
	case NVS_MSG_WAITERS:
		return "WAITERS";
	case NVS_MSG_WELCOME:
		return "WELCOME";
	case NVS_MSG_SWAP_HINT:
		return "SWAP_HINT";
	case NVS_MSG_PING:
		return "PING";
	case NVS_MSG_PONG:
		return "PONG";
	case NVS_MSG_LIMITS_IN_FORCE:
		return "LIMITS_IN_FORCE";
	case NVS_MSG_LIMITS_ASK:
		return "LIMITS_ASK";
	case NVS_MSG_MEMORY_MODE:
		return "MEMORY_MODE";
	case NVS_MSG_UNGATED:
		return "UNGATED";
	case NVS_MSG_UNGATED_ASK:
		return "UNGATED_ASK";
	case NVS_MSG_CTL_SET:
		return "CTL_SET";
	case NVS_MSG_CTL_SET_CLIENT:
		return "CTL_SET_CLIENT";
	case NVS_MSG_CTL_STATUS:
		return "CTL_STATUS";
	case NVS_MSG_CTL_REPLY:
		return "CTL_REPLY";
	default:
		return "UNKNOWN";
	}
}

const char *nvs_ungated_reason_name(unsigned r)
{
	static const char *const names[] = {"?",	 "unreachable",	 "lost",
					    "no-answer", "ping-timeout", "mode-wait"};
	return r <= NVS_UNGATED_REASONS ? names[r] : "?";
}

const char *nvs_mode_name(unsigned mode)
{
	switch (mode) {
	case NVS_MODE_OFF:
		return "off";
	case NVS_MODE_ON:
		return "on";
	case NVS_MODE_AUTO:
		return "auto";
	default:
		return "?";
	}
}

int nvs_mode_parse(const char *s)
{
	if (!strcasecmp(s, "on") || !strcmp(s, "1"))
		return NVS_MODE_ON;
	if (!strcasecmp(s, "off") || !strcmp(s, "0"))
		return NVS_MODE_OFF;
	if (!strcasecmp(s, "auto"))
		return NVS_MODE_AUTO;
	return -1;
}
