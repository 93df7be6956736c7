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

/* ---- payloads, from the table (messages.def) ---- */

/* Each field's C type has its wire size. */
#define NVS_U32(f) _Static_assert(sizeof p->f == 4, #f " is 4 bytes on the wire");
#define NVS_I32(f) _Static_assert(sizeof p->f == 4, #f " is 4 bytes on the wire");
#define NVS_U64(f) _Static_assert(sizeof p->f == 8, #f " is 8 bytes on the wire");
#define NVS_STR(f) _Static_assert(sizeof p->f > 1, #f " is a char array");
#define NVS_LAYOUT(member, type, fields)                                                           \
	static inline __attribute__((unused)) void check_##member(const type *p)                   \
	{                                                                                          \
		(void)p;                                                                           \
		fields                                                                             \
	}
#include "messages.def"
#undef NVS_U32
#undef NVS_I32
#undef NVS_U64
#undef NVS_STR

#define NVS_U32(f) put(w, (uint32_t)p->f, 4);
#define NVS_I32(f) put(w, (uint32_t)p->f, 4);
#define NVS_U64(f) put(w, (uint64_t)p->f, 8);
#define NVS_STR(f) put_str(w, p->f);
#define NVS_LAYOUT(member, type, fields)                                                           \
	static void enc_##member(struct wr *w, const struct nvs_msg *m)                            \
	{                                                                                          \
		const type *p = &m->u.member;                                                      \
		fields                                                                             \
	}
#include "messages.def"
#undef NVS_U32
#undef NVS_I32
#undef NVS_U64
#undef NVS_STR

#define NVS_U32(f) p->f = (uint32_t)get(r, 4);
#define NVS_I32(f) p->f = (int32_t)(uint32_t)get(r, 4);
#define NVS_U64(f) p->f = get(r, 8);
#define NVS_STR(f) get_str(r, p->f, sizeof p->f);
#define NVS_LAYOUT(member, type, fields)                                                           \
	static void dec_##member(struct rd *r, struct nvs_msg *m)                                  \
	{                                                                                          \
		type *p = &m->u.member;                                                            \
		fields                                                                             \
	}
#include "messages.def"
#undef NVS_U32
#undef NVS_I32
#undef NVS_U64
#undef NVS_STR

/* CTL_REPLY (layout `reply`): its text is out of the union, borrowed. */
static void enc_reply(struct wr *w, const struct nvs_msg *m)
{
	put(w, (uint32_t)m->reply_status, 4);
	put(w, m->reply_len, 4);
	if (!w->bad && m->reply_len <= w->cap - w->off && m->reply_len <= NVS_MAX_PAYLOAD - 8) {
		if (m->reply_len)
			memcpy(w->p + w->off, m->reply_text, m->reply_len);
		w->off += m->reply_len;
	} else {
		w->bad = 1;
	}
}

static void dec_reply(struct rd *r, struct nvs_msg *m)
{
	m->reply_status = (int32_t)(uint32_t)get(r, 4);
	m->reply_len = (uint32_t)get(r, 4);
	if (r->bad || r->len - r->off < m->reply_len) {
		r->bad = 1;
		return;
	}
	m->reply_text = (const char *)r->p + r->off;
	r->off += m->reply_len;
}

static void encode_payload(const struct nvs_msg *m, struct wr *w)
{
	switch (m->type) {
#define NVS_MESSAGE(name, type, from, on, layout)                                                  \
	case type:                                                                                 \
		enc_##layout(w, m);                                                                \
		return;
#include "messages.def"
	}
	w->bad = 1;
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
#define NVS_MESSAGE(name, type, from, on, layout)                                                  \
	case type:                                                                                 \
		dec_##layout(r, m);                                                                \
		return;
#include "messages.def"
	}
	r->bad = 1; /* unknown type: the connection is closed */
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
#define NVS_MESSAGE(name, type, from, on, layout)                                                  \
	case type:                                                                                 \
		return #name;
#include "messages.def"
	}
	return "UNKNOWN";
}

enum nvs_msg_from nvs_msg_from(unsigned type)
{
	switch (type) {
#define NVS_MESSAGE(name, type, from, on, layout)                                                  \
	case type:                                                                                 \
		return NVS_FROM_##from;
#include "messages.def"
	}
	return NVS_FROM_NONE;
}

unsigned nvs_msg_accepted_on(unsigned type)
{
	switch (type) {
#define NVS_MESSAGE(name, type, from, on, layout)                                                  \
	case type:                                                                                 \
		return on;
#include "messages.def"
	}
	return 0;
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
