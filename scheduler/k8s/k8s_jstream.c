/*
 * The incremental JSON reader of k8s_jstream.h: a byte-at-a-time state
 * machine (strings scanned with memchr, so skipping a long value costs
 * about a memory copy) over a fixed stack of frames, building cJSON nodes
 * only for what the schema keeps.
 */
#include "k8s_jstream.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* frame states */
enum {
	O_KEY_OR_END = 1, /* after '{' */
	O_KEY,		  /* after ',' */
	O_COLON,	  /* after a member name */
	O_VALUE,	  /* after ':' */
	O_NEXT,		  /* after a member's value */
	A_VALUE_OR_END,	  /* after '[' */
	A_VALUE,	  /* after ',' */
	A_NEXT,		  /* after an element */
};

/* tokens */
enum { T_STR = 1, T_NUM, T_LIT };
/* number states (JSON's grammar); the last four may end a number */
enum { N_SIGN = 1, N_DOT, N_E, N_ESIGN, N_ZERO, N_INT, N_FRAC, N_EXP };

void nvs_js_init(struct nvs_js *js, const struct nvs_js_schema *root,
		 void (*on_unit)(struct cJSON *skel, int overflowed, void *arg), void *arg)
{
	memset(js, 0, sizeof *js);
	js->root = root;
	js->on_unit = on_unit;
	js->arg = arg;
}

static int fail(struct nvs_js *js)
{
	js->error = 1;
	return -1;
}

/* ---- the skeleton ---- */

/* Where the next value goes and what it is: *s its schema (NULL: not
 * kept), *unit when it is an element handed out. */
static int ctx(struct nvs_js *js, const struct nvs_js_schema **s, int *unit)
{
	*unit = 0;
	*s = NULL;
	if (!js->depth) {
		*s = js->root;
		return 1;
	}
	const struct nvs_js_frame *f = &js->st[js->depth - 1];
	if (!f->node)
		return 0;
	if (f->arr) {
		*s = &f->schema->kids[0];
		*unit = f->schema->unit && !js->unit;
		return 1;
	}
	*s = js->vs;
	return js->vkeep;
}

/* Puts a new node in place; NULL (the node freed) when the budget of its
 * unit, or of the rest, is spent, or on no memory. */
static cJSON *attach(struct nvs_js *js, cJSON *item, int unit)
{
	if (!item)
		return NULL;
	unsigned *nodes = js->unit || unit ? &js->unit_nodes : &js->doc_nodes;
	int *over = js->unit || unit ? &js->unit_over : &js->doc_over;
	if (unit) {
		js->unit_nodes = 0;
		js->unit_over = 0;
	}
	if (*nodes >= NVS_JS_NODES) {
		*over = 1;
		cJSON_Delete(item);
		return NULL;
	}
	++*nodes;
	if (!js->depth) {
		js->doc = item;
	} else if (unit) {
		js->unit = item;
		js->unit_depth = js->depth;
	} else {
		struct nvs_js_frame *f = &js->st[js->depth - 1];
		if (f->arr)
			cJSON_AddItemToArray(f->node, item);
		else if (!cJSON_AddItemToObject(f->node, js->key, item)) {
			cJSON_Delete(item);
			return NULL;
		}
	}
	return item;
}

/* A value ended at the current depth. */
static void value_end(struct nvs_js *js)
{
	if (!js->depth) {
		js->ended = 1;
		return;
	}
	struct nvs_js_frame *f = &js->st[js->depth - 1];
	f->state = f->arr ? A_NEXT : O_NEXT;
	if (js->unit && js->depth == js->unit_depth) {
		cJSON *u = js->unit;
		js->unit = NULL;
		if (js->on_unit)
			js->on_unit(u, js->unit_over, js->arg);
		else
			cJSON_Delete(u);
	}
}

static int open_container(struct nvs_js *js, int arr)
{
	if (js->depth >= NVS_JS_DEPTH)
		return fail(js);
	const struct nvs_js_schema *s;
	int unit;
	cJSON *node = NULL;
	const struct nvs_js_schema *fs = NULL;
	if (ctx(js, &s, &unit)) {
		cJSON *item = attach(js, arr ? cJSON_CreateArray() : cJSON_CreateObject(), unit);
		if (item && s && s->kind == (arr ? NVS_JS_ARR : NVS_JS_OBJ)) {
			fs = s;
			node = item;
		}
	}
	struct nvs_js_frame *f = &js->st[js->depth++];
	f->schema = fs;
	f->node = node;
	f->arr = (unsigned char)arr;
	f->state = arr ? A_VALUE_OR_END : O_KEY_OR_END;
	js->vkeep = 0;
	return 0;
}

static void close_container(struct nvs_js *js)
{
	js->depth--;
	value_end(js);
}

/* ---- tokens ---- */

static void put(struct nvs_js *js, const char *p, size_t n)
{
	if (js->len + n > NVS_JS_STRMAX) {
		js->cut = 1;
		n = js->len < NVS_JS_STRMAX ? NVS_JS_STRMAX - js->len : 0;
	}
	memcpy(js->buf + js->len, p, n);
	js->len += n;
}

static void put_utf8(struct nvs_js *js, unsigned c)
{
	char b[4];
	size_t n;
	if (c < 0x80) {
		b[0] = (char)c;
		n = 1;
	} else if (c < 0x800) {
		b[0] = (char)(0xc0 | c >> 6);
		b[1] = (char)(0x80 | (c & 0x3f));
		n = 2;
	} else if (c < 0x10000) {
		b[0] = (char)(0xe0 | c >> 12);
		b[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		b[2] = (char)(0x80 | (c & 0x3f));
		n = 3;
	} else {
		b[0] = (char)(0xf0 | c >> 18);
		b[1] = (char)(0x80 | ((c >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((c >> 6) & 0x3f));
		b[3] = (char)(0x80 | (c & 0x3f));
		n = 4;
	}
	put(js, b, n);
}

/* A high surrogate not followed by its low half: U+FFFD. */
static void flush_hi(struct nvs_js *js)
{
	if (js->hi) {
		js->hi = 0;
		put_utf8(js, 0xfffd);
	}
}

static void begin_token(struct nvs_js *js, int tok, int keep)
{
	js->tok = tok;
	js->ts = 0;
	js->keep = keep;
	js->len = 0;
	js->cut = 0;
	js->hi = 0;
}

static void end_string(struct nvs_js *js)
{
	js->tok = 0;
	if (js->keep)
		flush_hi(js);
	if (js->is_key) {
		js->is_key = 0;
		struct nvs_js_frame *f = &js->st[js->depth - 1];
		f->state = O_COLON;
		js->vs = NULL;
		js->vkeep = 0;
		/* A NUL (raw or \u0000) ends the name, as it does in cJSON's
		 * tree. */
		size_t kl = strnlen(js->buf, js->len);
		if (!f->node || (kl == js->len && js->cut) || kl > NVS_JS_KEYMAX)
			return;
		memcpy(js->key, js->buf, kl);
		js->key[kl] = '\0';
		for (const struct nvs_js_schema *k = f->schema->kids; k->key; k++)
			if (!strcmp(k->key, js->key)) {
				js->vs = k;
				js->vkeep = 1;
				break;
			}
		return;
	}
	if (js->keep) {
		if (js->cut)
			js->buf[js->len++] = NVS_JS_CUT;
		js->buf[js->len] = '\0';
		const struct nvs_js_schema *s;
		int unit;
		ctx(js, &s, &unit);
		attach(js, cJSON_CreateString(js->buf), unit);
	}
	value_end(js);
}

/* A string's bytes from p; returns how many were taken (the closing quote
 * included when it came). */
static size_t string_bytes(struct nvs_js *js, const char *p, size_t n)
{
	size_t i = 0;
	while (i < n) {
		if (js->ts == 0) {
			const char *q = memchr(p + i, '"', n - i);
			size_t lim = q ? (size_t)(q - (p + i)) : n - i;
			const char *b = memchr(p + i, '\\', lim);
			size_t span = b ? (size_t)(b - (p + i)) : lim;
			if (js->keep && span) {
				flush_hi(js);
				put(js, p + i, span);
			}
			i += span;
			if (b) {
				js->ts = 1;
				i++;
				continue;
			}
			if (q) {
				end_string(js);
				return i + 1;
			}
			return i;
		}
		char c = p[i++];
		if (js->ts == 1) {
			static const char esc[] = "\"\\/bfnrt", dec[] = "\"\\/\b\f\n\r\t";
			const char *e = strchr(esc, c);
			if (c == 'u') {
				js->ts = 2;
				js->u = 0;
			} else if (c && e) {
				if (js->keep) {
					flush_hi(js);
					put(js, &dec[e - esc], 1);
				}
				js->ts = 0;
			} else {
				fail(js);
				return i;
			}
			continue;
		}
		/* \u: four hex digits (ts 2..5) */
		unsigned d;
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			d = (unsigned)((c | 0x20) - 'a' + 10);
		else {
			fail(js);
			return i;
		}
		js->u = js->u << 4 | d;
		if (++js->ts < 6)
			continue;
		js->ts = 0;
		if (!js->keep)
			continue;
		unsigned u = js->u;
		if (u >= 0xdc00 && u <= 0xdfff && js->hi) {
			put_utf8(js, 0x10000 + ((js->hi - 0xd800) << 10) + (u - 0xdc00));
			js->hi = 0;
		} else {
			flush_hi(js);
			if (u >= 0xd800 && u <= 0xdbff)
				js->hi = u;
			else
				put_utf8(js, u >= 0xdc00 && u <= 0xdfff ? 0xfffd : u);
		}
	}
	return i;
}

static void end_number(struct nvs_js *js)
{
	js->tok = 0;
	if (js->keep) {
		cJSON *item;
		if (js->cut) {
			item = cJSON_CreateNull();
		} else {
			js->buf[js->len] = '\0';
			item = cJSON_CreateNumber(strtod(js->buf, NULL));
		}
		const struct nvs_js_schema *s;
		int unit;
		ctx(js, &s, &unit);
		attach(js, item, unit);
	}
	value_end(js);
}

/* One character of a number; 0: it is not part of it (the number ended
 * before it, or is malformed: js->error). */
static int number_char(struct nvs_js *js, char c)
{
	int d = c >= '0' && c <= '9', s = js->ts, n = 0;
	switch (s) {
	case N_SIGN:
		n = c == '0' ? N_ZERO : d ? N_INT : 0;
		break;
	case N_ZERO:
		n = c == '.' ? N_DOT : (c | 0x20) == 'e' ? N_E : 0;
		break;
	case N_INT:
		n = d ? N_INT : c == '.' ? N_DOT : (c | 0x20) == 'e' ? N_E : 0;
		break;
	case N_DOT:
		n = d ? N_FRAC : 0;
		break;
	case N_FRAC:
		n = d ? N_FRAC : (c | 0x20) == 'e' ? N_E : 0;
		break;
	case N_E:
		n = d ? N_EXP : (c == '+' || c == '-') ? N_ESIGN : 0;
		break;
	case N_ESIGN:
	case N_EXP:
		n = d ? N_EXP : 0;
		break;
	}
	if (!n) {
		if (s < N_ZERO)
			fail(js);
		else
			end_number(js);
		return 0;
	}
	js->ts = n;
	if (js->keep) {
		if (js->len < NVS_JS_NUMMAX)
			js->buf[js->len++] = c;
		else
			js->cut = 1;
	}
	return 1;
}

static const char *const lits[] = {"true", "false", "null"};

static int literal_char(struct nvs_js *js, char c)
{
	const char *w = lits[js->u];
	if (c != w[js->ts])
		return fail(js);
	if (w[++js->ts])
		return 0;
	js->tok = 0;
	if (js->keep) {
		const struct nvs_js_schema *s;
		int unit;
		ctx(js, &s, &unit);
		cJSON *item = js->u == 0   ? cJSON_CreateTrue()
			      : js->u == 1 ? cJSON_CreateFalse()
					   : cJSON_CreateNull();
		attach(js, item, unit);
	}
	value_end(js);
	return 0;
}

static int value_start(struct nvs_js *js, char c)
{
	if (c == '{' || c == '[')
		return open_container(js, c == '[');
	const struct nvs_js_schema *s;
	int unit;
	int keep = ctx(js, &s, &unit);
	if (c == '"') {
		begin_token(js, T_STR, keep);
		return 0;
	}
	if (c == '-' || (c >= '0' && c <= '9')) {
		begin_token(js, T_NUM, keep);
		js->ts = N_SIGN;
		if (c != '-')
			number_char(js, c);
		else if (keep)
			js->buf[js->len++] = c;
		return 0;
	}
	for (unsigned i = 0; i < 3; i++)
		if (c == lits[i][0]) {
			begin_token(js, T_LIT, keep);
			js->u = i;
			js->ts = 1;
			return 0;
		}
	return fail(js);
}

/* After a member or an element: ',' then `next`, or the closing `end`. */
static int next_or_end(struct nvs_js *js, struct nvs_js_frame *f, char c, char end, int next)
{
	if (c == ',')
		f->state = (unsigned char)next;
	else if (c == end)
		close_container(js);
	else
		return fail(js);
	return 0;
}

static int structural(struct nvs_js *js, char c)
{
	if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
		return 0;
	if (!js->depth)
		return js->ended ? fail(js) : value_start(js, c);
	struct nvs_js_frame *f = &js->st[js->depth - 1];
	int empty_end =
	    (f->state == O_KEY_OR_END && c == '}') || (f->state == A_VALUE_OR_END && c == ']');
	if (empty_end) {
		close_container(js);
		return 0;
	}
	switch (f->state) {
	case O_KEY_OR_END:
	case O_KEY:
		if (c != '"')
			return fail(js);
		begin_token(js, T_STR, 1);
		js->is_key = 1;
		return 0;
	case O_COLON:
		if (c != ':')
			return fail(js);
		f->state = O_VALUE;
		return 0;
	case O_NEXT:
		return next_or_end(js, f, c, '}', O_KEY);
	case A_NEXT:
		return next_or_end(js, f, c, ']', A_VALUE);
	default: /* O_VALUE, A_VALUE_OR_END, A_VALUE */
		return value_start(js, c);
	}
}

int nvs_js_feed(struct nvs_js *js, const char *p, size_t n)
{
	size_t i = 0;
	while (i < n && !js->error) {
		if (js->tok == T_STR) {
			i += string_bytes(js, p + i, n - i);
			continue;
		}
		char c = p[i];
		if (js->tok == T_NUM && number_char(js, c)) {
			i++;
			continue;
		}
		if (js->error)
			break;
		if (js->tok == T_LIT) {
			literal_char(js, c);
			i++;
			continue;
		}
		structural(js, c);
		i++;
	}
	return js->error ? -1 : 0;
}

struct cJSON *nvs_js_end(struct nvs_js *js, int *overflowed)
{
	if (!js->error && js->tok == T_NUM && js->ts >= N_ZERO)
		end_number(js);
	cJSON *doc = js->doc;
	js->doc = NULL;
	cJSON_Delete(js->unit);
	js->unit = NULL;
	if (overflowed)
		*overflowed = js->doc_over;
	if (js->error || js->tok || !js->ended) {
		cJSON_Delete(doc);
		return NULL;
	}
	return doc;
}
