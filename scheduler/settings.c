/*
 * The settings engine (settings.h): settings.def expanded into one row per
 * setting (name, variable, type, range, default, where the value lives, how
 * to read and write it), then everything that needs the list walks the rows:
 * defaults, the environment, the option parser, validation, provenance,
 * the status, --help, the docs' table and the man page.
 */
#include "settings.h"

#include "core/coschedule.h"
#include "health.h"
#include "k8s/k8s_watch.h"
#include "peer_limits.h"
#include "log.h"
#include "metrics.h"
#include "parse.h"
#include "peer.h"
#include "plog.h"
#include "core/state.h"
#include "state_file.h"
#include "unmanaged.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the rows ---- */

enum kind { K_BOOL, K_MODE, K_ENUM, K_UINT, K_PCT, K_MS, K_TQ, K_SIZE, K_CAPS, K_STR, K_ADDR };

/* A value on its way: numbers in u, strings (and a capacity list's exact
 * text) in s. */
struct sval {
	uint64_t u;
	char s[1024];
};

/* Per type: its kind, its flag's argument (SW: -1 takes one; 0/1 a switch
 * setting that value), metavar, what a bare size means, how the variable is
 * accessed (U number, S string, C capacity list). */
#define KIND_T_BOOL K_BOOL
#define KIND_T_ON K_BOOL
#define KIND_T_OFF K_BOOL
#define KIND_T_MODE K_MODE
#define KIND_T_ENUM K_ENUM
#define KIND_T_UINT K_UINT
#define KIND_T_PCT K_PCT
#define KIND_T_MS K_MS
#define KIND_T_TQ K_TQ
#define KIND_T_SIZE K_SIZE
#define KIND_T_SIZE_MIB K_SIZE
#define KIND_T_CAPS K_CAPS
#define KIND_T_DIR K_STR
#define KIND_T_FILE K_STR
#define KIND_T_NAME K_STR
#define KIND_T_URL K_STR
#define KIND_T_ADDR K_ADDR
#define SW_T_ON 1
#define SW_T_OFF 0
#define META_T_BOOL "on|off"
#define META_T_MODE "MODE"
#define META_T_UINT "N"
#define META_T_PCT "PCT"
#define META_T_MS "MS"
#define META_T_TQ "TIME"
#define META_T_SIZE "SIZE"
#define META_T_SIZE_MIB "SIZE"
#define META_T_CAPS "SIZE[,...]"
#define META_T_DIR "DIR"
#define META_T_FILE "FILE"
#define META_T_NAME "NAME"
#define META_T_URL "URL"
#define META_T_ADDR "ADDR"
#define BARE_T_SIZE_MIB (1ull << 20)
#define ACCESS_T_BOOL ACCESS_U
#define ACCESS_T_ON ACCESS_U
#define ACCESS_T_OFF ACCESS_U
#define ACCESS_T_MODE ACCESS_U
#define ACCESS_T_ENUM ACCESS_U
#define ACCESS_T_UINT ACCESS_U
#define ACCESS_T_PCT ACCESS_U
#define ACCESS_T_MS ACCESS_U
#define ACCESS_T_TQ ACCESS_U
#define ACCESS_T_SIZE ACCESS_U
#define ACCESS_T_SIZE_MIB ACCESS_U
#define ACCESS_T_CAPS ACCESS_C
#define ACCESS_T_DIR ACCESS_S
#define ACCESS_T_FILE ACCESS_S
#define ACCESS_T_NAME ACCESS_S
#define ACCESS_T_URL ACCESS_S
#define ACCESS_T_ADDR ACCESS_S

#define SW_T_BOOL -1
#define SW_T_MODE -1
#define SW_T_ENUM -1
#define SW_T_UINT -1
#define SW_T_PCT -1
#define SW_T_MS -1
#define SW_T_TQ -1
#define SW_T_SIZE -1
#define SW_T_SIZE_MIB -1
#define SW_T_CAPS -1
#define SW_T_DIR -1
#define SW_T_FILE -1
#define SW_T_NAME -1
#define SW_T_URL -1
#define SW_T_ADDR -1
#define META_T_ON NULL
#define META_T_OFF NULL
#define META_T_ENUM NULL
#define BARE_T_BOOL 1
#define BARE_T_ON 1
#define BARE_T_OFF 1
#define BARE_T_MODE 1
#define BARE_T_ENUM 1
#define BARE_T_UINT 1
#define BARE_T_PCT 1
#define BARE_T_MS 1
#define BARE_T_TQ 1
#define BARE_T_SIZE 1
#define BARE_T_CAPS 1
#define BARE_T_DIR 1
#define BARE_T_FILE 1
#define BARE_T_NAME 1
#define BARE_T_URL 1
#define BARE_T_ADDR 1

static void caps_store(struct sched_config *c, const char *text);

/* A string value into its array (at most cap - 1 bytes). */
static void str_store(char *dst, size_t cap, const char *s)
{
	size_t n = strnlen(s, cap - 1);
	memcpy(dst, s, n);
	dst[n] = '\0';
}
static void caps_exact(const struct sched_config *c, char *b, size_t cap);

/* Each row's accessors. A range that does not fit the variable's type, or
 * a string longer than its array, does not compile. */
#define ACCESS_U(id, dst, hi)                                                                      \
	_Static_assert((uint64_t)(__typeof__(dst))(hi) == (uint64_t)(hi),                          \
		       #id ": the range does not fit its variable");                               \
	static void store_##id(const struct sval *v)                                               \
	{                                                                                          \
		dst = (__typeof__(dst))v->u;                                                       \
	}                                                                                          \
	static void load_##id(struct sval *v)                                                      \
	{                                                                                          \
		v->u = (uint64_t)(dst);                                                            \
		v->s[0] = '\0';                                                                    \
	}
#define ACCESS_S(id, dst, hi)                                                                      \
	_Static_assert((hi) < sizeof(dst), #id ": the longest value does not fit its variable");   \
	static void store_##id(const struct sval *v)                                               \
	{                                                                                          \
		str_store(dst, sizeof(dst), v->s); /* validated: it fits */                        \
	}                                                                                          \
	static void load_##id(struct sval *v)                                                      \
	{                                                                                          \
		v->u = 0;                                                                          \
		snprintf(v->s, sizeof v->s, "%s", dst);                                            \
	}
#define ACCESS_C(id, dst, hi)                                                                      \
	static void store_##id(const struct sval *v)                                               \
	{                                                                                          \
		caps_store(&(dst), v->s);                                                          \
	}                                                                                          \
	static void load_##id(struct sval *v)                                                      \
	{                                                                                          \
		v->u = (dst).capacity_all;                                                         \
		caps_exact(&(dst), v->s, sizeof v->s);                                             \
	}

#define NVS_SETTING(id, name, sopt, env, type, choices, lo, hi, def, flags, ctl, dst, help)        \
	ACCESS_##type(id, dst, hi)
#include "settings.def"
#undef NVS_SETTING

struct setting {
	const char *name, *env, *choices, *def, *help, *meta;
	int sopt, sw; /* sw: -1 the flag takes a value; 0/1 a switch setting it */
	enum kind kind;
	const char *type; /* "T_DIR": the noun in messages */
	uint64_t bare, lo, hi;
	unsigned flags;
	uint32_t ctl;
	void (*store)(const struct sval *v);
	void (*load)(struct sval *v);
};

static const struct setting rows[NVS_SET_COUNT] = {
#define NVS_SETTING(id, name_, sopt_, env_, type_, choices_, lo_, hi_, def_, flags_, ctl_, dst,    \
		    help_)                                                                         \
	[NVS_SET_##id] = {.name = name_,                                                           \
			  .env = env_,                                                             \
			  .choices = choices_,                                                     \
			  .def = def_,                                                             \
			  .help = help_,                                                           \
			  .meta = META_##type_,                                                    \
			  .sopt = sopt_,                                                           \
			  .sw = SW_##type_,                                                        \
			  .kind = KIND_##type_,                                                    \
			  .type = #type_,                                                          \
			  .bare = BARE_##type_,                                                    \
			  .lo = (uint64_t)(lo_),                                                   \
			  .hi = (uint64_t)(hi_),                                                   \
			  .flags = flags_,                                                         \
			  .ctl = ctl_,                                                             \
			  .store = store_##id,                                                     \
			  .load = load_##id},
#include "settings.def"
#undef NVS_SETTING
};

/* The rows in table order with their group headings (id -1). */
static const struct item {
	const char *group;
	int id;
} items[] = {
#define NVS_SETTING_GROUP(title) {title, -1},
#define NVS_SETTING(id, ...) {NULL, NVS_SET_##id},
#include "settings.def"
#undef NVS_SETTING_GROUP
#undef NVS_SETTING
};
#define NITEMS (sizeof items / sizeof items[0])

/* Provenance: of the value in force, of the configured one (kept for
 * nvsharectl --reset), and per GPU (0: follows the value for all GPUs). */
static struct {
	enum nvs_setting_src src, conf_src;
	struct sval *conf;
} st[NVS_SET_COUNT];
static unsigned char gsrc[NVS_MAX_GPUS][NVS_SET_COUNT];

/* ---- parsing and formatting ---- */

static int in_range(const struct setting *s, uint64_t u)
{
	if ((s->flags & SF_ZERO_OFF) && u == 0)
		return 1;
	if ((s->flags & SF_NONE) && s->kind != K_STR && u == NVS_NO_LIMIT)
		return 1;
	return u >= s->lo && u <= s->hi;
}

static void choice_name(const char *choices, uint64_t i, char *b, size_t cap)
{
	const char *p = choices;
	for (uint64_t k = 0; k < i && p; k++) {
		p = strchr(p, '|');
		if (p)
			p++;
	}
	if (!p) {
		snprintf(b, cap, "%" PRIu64, i);
		return;
	}
	const char *bar = strchr(p, '|');
	snprintf(b, cap, "%.*s", (int)(bar ? bar - p : (long)strlen(p)), p);
}

static void fmt_ms(uint64_t ms, char *b, size_t cap)
{
	if (ms && ms % 60000 == 0)
		snprintf(b, cap, "%" PRIu64 "m", ms / 60000);
	else if (ms && ms % 1000 == 0)
		snprintf(b, cap, "%" PRIu64 "s", ms / 1000);
	else
		snprintf(b, cap, "%" PRIu64 "ms", ms);
}

/* "[a-f0-9:.]" in brackets or not: the bare literal. */
static int addr_parse(const char *v, char *out, size_t cap)
{
	char t[64];
	size_t n = strlen(v);
	if (n >= 2 && v[0] == '[' && v[n - 1] == ']') {
		v++;
		n -= 2;
	}
	if (n >= sizeof t || n >= cap)
		return -1;
	memcpy(t, v, n);
	t[n] = '\0';
	unsigned char bin[16];
	if (inet_pton(AF_INET, t, bin) != 1 && inet_pton(AF_INET6, t, bin) != 1)
		return -1;
	snprintf(out, cap, "%s", t);
	return 0;
}

static int parse(const struct setting *s, const char *text, struct sval *v)
{
	memset(v, 0, sizeof *v);
	int b;
	unsigned p;
	switch (s->kind) {
	case K_BOOL:
		if (nvs_parse_bool(text, &b))
			return -1;
		v->u = (uint64_t)b;
		return 0;
	case K_MODE:
		if ((b = nvs_mode_parse(text)) < 0)
			return -1;
		v->u = (uint64_t)b;
		return 0;
	case K_ENUM:
		if ((b = nvs_parse_choice(s->choices, text, 1)) < 0)
			return -1;
		v->u = (uint64_t)b;
		return 0;
	case K_UINT:
		if (nvs_parse_u64(text, 0, UINT64_MAX, &v->u))
			return -1;
		break;
	case K_PCT:
		if (nvs_parse_percent(text, 0, UINT32_MAX, &p))
			return -1;
		v->u = p;
		break;
	case K_MS:
		if (nvs_parse_duration_ms(text, &v->u))
			return -1;
		break;
	case K_TQ:
		if (nvs_parse_tq_ms(text, &v->u))
			return -1;
		break;
	case K_SIZE:
		if ((s->flags & SF_NONE) && !strcasecmp(text, "none"))
			v->u = NVS_NO_LIMIT;
		else if (nvs_parse_size(text, s->bare, &v->u))
			return -1;
		break;
	case K_CAPS: {
		static struct sched_config c; /* 64 capacities: not on the stack */
		memset(&c, 0, sizeof c);
		if (nvs_parse_capacity_list(text, &c) || c.capacity_all > s->hi)
			return -1;
		for (unsigned i = 0; i < NVS_MAX_GPUS; i++)
			if (c.capacity[i] > s->hi)
				return -1;
		v->u = c.capacity_all;
		caps_exact(&c, v->s, sizeof v->s);
		return 0;
	}
	case K_STR:
		if ((s->flags & SF_NONE) && !strcmp(text, "none"))
			return 0;
		if (!*text || strlen(text) > s->hi)
			return -1;
		snprintf(v->s, sizeof v->s, "%s", text);
		return 0;
	case K_ADDR:
		return addr_parse(text, v->s, sizeof v->s);
	}
	return in_range(s, v->u) ? 0 : -1;
}

/* Human text of a value: what a user would type to get it back. */
static void text_of(const struct setting *s, const struct sval *v, char *b, size_t cap)
{
	switch (s->kind) {
	case K_BOOL:
		snprintf(b, cap, "%s", v->u ? "on" : "off");
		return;
	case K_MODE:
		snprintf(b, cap, "%s", nvs_mode_name((unsigned)v->u));
		return;
	case K_ENUM:
		choice_name(s->choices, v->u, b, cap);
		return;
	case K_MS:
	case K_TQ:
		fmt_ms(v->u, b, cap);
		return;
	case K_SIZE:
		if (v->u == NVS_NO_LIMIT && (s->flags & SF_NONE))
			snprintf(b, cap, "none");
		else
			nvs_format_size(v->u, b, cap);
		return;
	case K_CAPS: {
		/* exact "17179869184,auto,8589934592" -> "16Gi,auto,8Gi" */
		char t[sizeof v->s], *save = NULL;
		snprintf(t, sizeof t, "%s", v->s);
		size_t len = 0;
		b[0] = '\0';
		for (char *tok = strtok_r(t, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			char one[32];
			uint64_t x = strtoull(tok, NULL, 10);
			if (x)
				nvs_format_size(x, one, sizeof one);
			else
				snprintf(one, sizeof one, "auto");
			int n = snprintf(b + len, cap - len, "%s%s", len ? "," : "", one);
			if (n < 0 || (size_t)n >= cap - len)
				break;
			len += (size_t)n;
		}
		return;
	}
	case K_STR:
		snprintf(b, cap, "%s", !v->s[0] && (s->flags & SF_NONE) ? "none" : v->s);
		return;
	case K_ADDR:
		snprintf(b, cap, "%s", v->s);
		return;
	case K_UINT:
	case K_PCT:
		break;
	}
	snprintf(b, cap, "%" PRIu64, v->u);
}

/* Exact text, for comparing (numbers in decimal, names as they are). */
static void exact_of(const struct setting *s, const struct sval *v, char *b, size_t cap)
{
	if (s->kind == K_BOOL || s->kind == K_MODE || s->kind == K_ENUM)
		text_of(s, v, b, cap);
	else if (s->kind == K_CAPS || s->kind == K_STR || s->kind == K_ADDR)
		snprintf(b, cap, "%s", v->s);
	else
		snprintf(b, cap, "%" PRIu64, v->u);
}

static const char *noun(const struct setting *s)
{
	if (!strcmp(s->type, "T_DIR"))
		return "a directory path";
	if (!strcmp(s->type, "T_FILE"))
		return "a file path";
	if (!strcmp(s->type, "T_URL"))
		return "a URL";
	return "a name";
}

/* What is valid, in words: the "expected ..." of every message. */
static void range_text(const struct setting *s, char *b, size_t cap)
{
	char lo[32], hi[32], ch[128];
	const char *off = (s->flags & SF_ZERO_OFF) ? "0 (off) or " : "";
	switch (s->kind) {
	case K_BOOL:
		snprintf(b, cap, "1 or 0 (true/false, on/off, yes/no)");
		return;
	case K_MODE:
		snprintf(b, cap, "on, off or auto");
		return;
	case K_ENUM: {
		/* "a|b|c" -> "a, b or c" */
		size_t n = 0;
		const char *p = s->choices;
		ch[0] = '\0';
		while (*p && n + 8 < sizeof ch) {
			const char *bar = strchr(p, '|');
			size_t len = bar ? (size_t)(bar - p) : strlen(p);
			const char *sep = !n ? "" : (bar ? ", " : " or ");
			n += (size_t)snprintf(ch + n, sizeof ch - n, "%s%.*s", sep, (int)len, p);
			if (!bar)
				break;
			p = bar + 1;
		}
		snprintf(b, cap, "%s", ch);
		return;
	}
	case K_UINT:
		snprintf(b, cap, "%san integer %" PRIu64 "..%" PRIu64, off, s->lo, s->hi);
		return;
	case K_PCT:
		snprintf(b, cap, "a percent %" PRIu64 "..%" PRIu64, s->lo, s->hi);
		return;
	case K_MS:
		snprintf(b, cap, "%s%" PRIu64 "..%" PRIu64 " ms (250ms, 2s, 1m also)", off, s->lo,
			 s->hi);
		return;
	case K_TQ:
		fmt_ms(s->lo, lo, sizeof lo);
		snprintf(b, cap, "%s .. 24h: seconds (30, 0.5) or with unit (300ms, 2m)", lo);
		return;
	case K_SIZE:
		nvs_format_size(s->lo, lo, sizeof lo);
		nvs_format_size(s->hi, hi, sizeof hi);
		if (s->lo)
			snprintf(b, cap, "a size %s..%s%s%s", lo, hi,
				 s->bare > 1 ? " (a bare number is MiB)" : " (512Mi, 4Gi)",
				 (s->flags & SF_NONE) ? ", or none" : "");
		else
			snprintf(b, cap, "a size up to %s (512Mi, 4Gi)%s", hi,
				 (s->flags & SF_NONE) ? ", or none" : "");
		return;
	case K_CAPS:
		nvs_format_size(s->hi, hi, sizeof hi);
		snprintf(b, cap, "a size up to %s (16Gi), or a list by GPU index (16Gi,,8Gi; auto)",
			 hi);
		return;
	case K_STR:
		snprintf(b, cap, "%s of at most %" PRIu64 " bytes%s", noun(s), s->hi,
			 (s->flags & SF_NONE) ? ", or none" : "");
		return;
	case K_ADDR:
		snprintf(b, cap, "an IPv4 or IPv6 address (127.0.0.1, 0.0.0.0, ::)");
		return;
	}
}

/* ---- values ---- */

static void load(int id, struct sval *v)
{
	rows[id].load(v);
	if (rows[id].flags & SF_INVERT)
		v->u = !v->u;
}

static void store(int id, const struct sval *v)
{
	struct sval t;
	if (rows[id].flags & SF_INVERT) {
		t = *v;
		t.u = !t.u;
		v = &t;
	}
	rows[id].store(v);
}

static void bad(const char *what, const char *v, const struct setting *s)
{
	char r[256];
	range_text(s, r, sizeof r);
	fprintf(stderr, "nvshare-scheduler: bad value for %s: \"%s\" (expected %s)\n", what, v, r);
}

/* A value typed by a user: -1 (reported) when bad. */
static int apply_text(int id, const char *text, enum nvs_setting_src src, const char *what)
{
	static struct sval v;
	if (parse(&rows[id], text, &v)) {
		bad(what, text, &rows[id]);
		return -1;
	}
	store(id, &v);
	st[id].src = src;
	return 0;
}

void nvs_settings_defaults(void)
{
	static struct sval v;
	for (int id = 0; id < NVS_SET_COUNT; id++) {
		const struct setting *s = &rows[id];
		memset(&v, 0, sizeof v);
		if (!(s->flags & SF_DERIVED) && *s->def && parse(s, s->def, &v)) {
			/* The table's own default: a bug, caught by t_settings. */
			bad("the default of", s->def, s);
			abort();
		}
		store(id, &v);
		st[id].src = NVS_SRC_DEFAULT;
	}
	memset(gsrc, 0, sizeof gsrc);
}

static int from_env(void)
{
	int errors = 0;
	for (int id = 0; id < NVS_SET_COUNT; id++) {
		const char *v = getenv(rows[id].env);
		if (v && *v && apply_text(id, v, NVS_SRC_ENV, rows[id].env))
			errors++;
	}
	return errors;
}

/* The flag of a row: "--tq", "--no-nvml". */
static const char *flag_of(int id, char *b, size_t cap)
{
	snprintf(b, cap, "--%s%s", rows[id].sw == 0 ? "no-" : "", rows[id].name);
	return b;
}

#define OPT_BASE 1000
#define OPT_TABLE 999

/* The row of a short option, or -1. */
static int short_id(int o)
{
	for (int id = 0; id < NVS_SET_COUNT; id++)
		if (rows[id].sopt && rows[id].sopt == o)
			return id;
	return -1;
}

/* A flag of row id (a switch, or with its value): -1 (reported) when bad. */
static int set_flag(int id, const char *arg, const char *flag)
{
	if (rows[id].sw < 0)
		return apply_text(id, arg, NVS_SRC_FLAG, flag);
	struct sval v;
	memset(&v, 0, sizeof v);
	v.u = (uint64_t)rows[id].sw;
	store(id, &v);
	st[id].src = NVS_SRC_FLAG;
	return 0;
}

static int from_args(int argc, char **argv, const char *version)
{
	static char names[NVS_SET_COUNT][64];
	static struct option opts[NVS_SET_COUNT + 4];
	char shorts[3 * NVS_SET_COUNT + 8];
	size_t ns = 0;
	unsigned n = 0;
	for (int id = 0; id < NVS_SET_COUNT; id++) {
		const struct setting *s = &rows[id];
		flag_of(id, names[id], sizeof names[id]);
		opts[n++] =
		    (struct option){names[id] + 2, s->sw < 0 ? required_argument : no_argument,
				    NULL, OPT_BASE + id};
		if (s->sopt) {
			shorts[ns++] = (char)s->sopt;
			if (s->sw < 0)
				shorts[ns++] = ':';
		}
	}
	opts[n++] = (struct option){"version", no_argument, NULL, 'V'};
	opts[n++] = (struct option){"help", no_argument, NULL, 'h'};
	opts[n++] = (struct option){"help-table", required_argument, NULL, OPT_TABLE};
	opts[n] = (struct option){NULL, 0, NULL, 0};
	memcpy(shorts + ns, "Vh", 3);
	int o;
	optind = 0; /* glibc: start afresh (tests load more than once) */
	while ((o = getopt_long(argc, argv, shorts, opts, NULL)) != -1) {
		if (o >= OPT_BASE && o < OPT_BASE + NVS_SET_COUNT) {
			if (set_flag(o - OPT_BASE, optarg, names[o - OPT_BASE]))
				return 2;
			continue;
		}
		int id = short_id(o);
		if (id >= 0) {
			if (set_flag(id, optarg, names[id]))
				return 2;
			continue;
		}
		switch (o) {
		case 'V':
			printf("nvshare-scheduler %s\n", version);
			return 0;
		case 'h':
			nvs_settings_usage(stdout);
			return 0;
		case OPT_TABLE:
			if (nvs_settings_print_table(stdout, optarg, version) == 0)
				return 0;
			fprintf(
			    stderr,
			    "nvshare-scheduler: bad value for --help-table: \"%s\" (expected md "
			    "or man)\n",
			    optarg);
			return 2;
		default:
			nvs_settings_usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "nvshare-scheduler: unexpected argument \"%s\"\n", argv[optind]);
		nvs_settings_usage(stderr);
		return 2;
	}
	return -1;
}

int nvs_settings_load(int argc, char **argv, const char *version)
{
	nvs_settings_defaults();
	/* Every bad variable is reported, then the flags (the first bad one). */
	if (from_env())
		return 2;
	int rc = from_args(argc, argv, version);
	if (rc >= 0)
		return rc;
	/* The configured values: what nvsharectl --reset returns to. */
	for (int id = 0; id < NVS_SET_COUNT; id++) {
		if (!st[id].conf && !(st[id].conf = malloc(sizeof *st[id].conf))) {
			fprintf(stderr, "nvshare-scheduler: out of memory\n");
			return 1;
		}
		load(id, st[id].conf);
		st[id].conf_src = st[id].src;
	}
	return -1;
}

/* ---- lookups ---- */

int nvs_setting_by_name(const char *name)
{
	for (int id = 0; id < NVS_SET_COUNT; id++)
		if (!strcmp(rows[id].name, name))
			return id;
	return -1;
}

int nvs_setting_by_ctl(uint32_t field)
{
	for (int id = 0; field && id < NVS_SET_COUNT; id++)
		if (rows[id].ctl == field)
			return id;
	return -1;
}

const char *nvs_setting_name(int id)
{
	return rows[id].name;
}

uint32_t nvs_setting_ctl(int id)
{
	return rows[id].ctl;
}

unsigned nvs_setting_flags(int id)
{
	return rows[id].flags;
}

/* ---- run-time values ---- */

int nvs_capacity_check(const struct gpu *g, uint64_t cap, char *why, size_t n)
{
	char b1[32], b2[32];
	if (!g->total_mem || cap <= g->total_mem)
		return 0;
	snprintf(why, n,
		 "capacity %s for GPU %d is more than its memory %s (mode off runs everyone "
		 "together instead)",
		 nvs_format_size(cap, b1, sizeof b1), g->index,
		 nvs_format_size(g->total_mem, b2, sizeof b2));
	return -1;
}

int nvs_setting_check(int id, uint64_t v, int gpu, char *why, size_t cap)
{
	const struct setting *s = &rows[id];
	if (!in_range(s, v)) {
		char t[64], r[256];
		nvs_setting_format(id, v, t, sizeof t);
		range_text(s, r, sizeof r);
		snprintf(why, cap, "%s %s is out of range (expected %s)", s->name, t, r);
		return -1;
	}
	if (id != NVS_SET_CAPACITY || !v)
		return 0;
	for (unsigned i = 0; i < S.ngpus; i++)
		if ((gpu < 0 || (unsigned)gpu == i) && nvs_capacity_check(&S.gpus[i], v, why, cap))
			return -1;
	return 0;
}

void nvs_setting_apply(int id, uint64_t v)
{
	static struct sval t;
	memset(&t, 0, sizeof t);
	t.u = v;
	if (rows[id].kind == K_CAPS) { /* one capacity for every GPU */
		static struct sched_config c;
		memset(&c, 0, sizeof c);
		c.capacity_all = v;
		caps_exact(&c, t.s, sizeof t.s);
	}
	store(id, &t);
}

void nvs_setting_format(int id, uint64_t v, char *buf, size_t cap)
{
	static struct sval t;
	memset(&t, 0, sizeof t);
	t.u = v;
	if (rows[id].kind == K_CAPS)
		snprintf(t.s, sizeof t.s, "%" PRIu64, v); /* "0": auto */
	text_of(&rows[id], &t, buf, cap);
}

/* ---- provenance ---- */

static const char *const src_names[] = {"default",    "environment", "flag",
					"state-file", "nvsharectl",  "all-gpus"};

const char *nvs_setting_src_name(enum nvs_setting_src src)
{
	return (unsigned)src < sizeof src_names / sizeof src_names[0] ? src_names[src] : "?";
}

void nvs_setting_note(int id, int gpu, enum nvs_setting_src src)
{
	if (gpu < 0) {
		st[id].src = src;
		for (unsigned i = 0; i < NVS_MAX_GPUS; i++)
			gsrc[i][id] = 0;
	} else if (gpu < NVS_MAX_GPUS) {
		gsrc[gpu][id] = src == NVS_SRC_INHERIT ? 0 : (unsigned char)src;
	}
}

enum nvs_setting_src nvs_setting_source(int id, int gpu)
{
	if (gpu >= 0 && gpu < NVS_MAX_GPUS && gsrc[gpu][id])
		return (enum nvs_setting_src)gsrc[gpu][id];
	return st[id].src;
}

enum nvs_setting_src nvs_setting_configured_source(int id)
{
	return st[id].conf_src;
}

void nvs_setting_reset(int id)
{
	if (st[id].conf)
		store(id, st[id].conf);
	nvs_setting_note(id, -1, st[id].conf_src);
}

int nvs_setting_changed(int id)
{
	char a[1100], b[1100];
	nvs_setting_configured_text(id, 1, a, sizeof a);
	static struct sval v;
	load(id, &v);
	exact_of(&rows[id], &v, b, sizeof b);
	return strcmp(a, b) != 0;
}

void nvs_setting_text(int id, char *buf, size_t cap)
{
	static struct sval v;
	load(id, &v);
	text_of(&rows[id], &v, buf, cap);
}

void nvs_setting_configured_text(int id, int exact, char *buf, size_t cap)
{
	static struct sval none;
	const struct sval *v = st[id].conf ? st[id].conf : &none;
	if (exact)
		exact_of(&rows[id], v, buf, cap);
	else
		text_of(&rows[id], v, buf, cap);
}

const char *nvs_setting_origin(int id, char *buf, size_t cap)
{
	char f[80];
	switch (st[id].conf_src) {
	case NVS_SRC_ENV:
		snprintf(buf, cap, "%s", rows[id].env);
		break;
	case NVS_SRC_FLAG:
		snprintf(buf, cap, "the flag %s", flag_of(id, f, sizeof f));
		break;
	default:
		snprintf(buf, cap, "the default");
		break;
	}
	return buf;
}

/* ---- status ---- */

static cJSON *typed(const struct setting *s, const struct sval *v)
{
	char t[1100];
	switch (s->kind) {
	case K_BOOL:
		return cJSON_CreateBool(v->u != 0);
	case K_UINT:
	case K_PCT:
	case K_MS:
	case K_TQ:
	case K_SIZE:
		if (s->kind == K_SIZE && (s->flags & SF_NONE) && v->u == NVS_NO_LIMIT)
			return cJSON_CreateNull();
		return cJSON_CreateNumber((double)v->u);
	default:
		text_of(s, v, t, sizeof t);
		return cJSON_CreateString(t);
	}
}

cJSON *nvs_settings_json(void)
{
	cJSON *o = cJSON_CreateObject();
	static struct sval v;
	char t[1100];
	for (int id = 0; o && id < NVS_SET_COUNT; id++) {
		const struct setting *s = &rows[id];
		cJSON *e = cJSON_AddObjectToObject(o, s->name);
		if (!e)
			continue;
		load(id, &v);
		if ((s->flags & SF_DERIVED) && !v.u) { /* not set: computed */
			cJSON_AddNullToObject(e, "value");
			cJSON_AddStringToObject(e, "text", s->def);
		} else {
			cJSON_AddItemToObject(e, "value", typed(s, &v));
			text_of(s, &v, t, sizeof t);
			cJSON_AddStringToObject(e, "text", t);
		}
		cJSON_AddStringToObject(e, "source", nvs_setting_src_name(st[id].src));
		cJSON_AddStringToObject(e, "env", s->env);
		if (!(s->flags & SF_RUNTIME))
			continue;
		cJSON_AddStringToObject(e, "runtime", (s->flags & SF_GPU) ? "gpu" : "all");
		cJSON_AddNumberToObject(e, "ctl", s->ctl);
		if (st[id].conf) {
			cJSON_AddItemToObject(e, "configured", typed(s, st[id].conf));
			text_of(s, st[id].conf, t, sizeof t);
			cJSON_AddStringToObject(e, "configured_text", t);
		}
		cJSON_AddStringToObject(e, "configured_source",
					nvs_setting_src_name(st[id].conf_src));
	}
	return o;
}

cJSON *nvs_settings_gpu_sources(int gpu)
{
	cJSON *o = cJSON_CreateObject();
	for (int id = 0; o && id < NVS_SET_COUNT; id++)
		if (rows[id].flags & SF_GPU) /* "all-gpus": follows the value for all */
			cJSON_AddStringToObject(
			    o, rows[id].name,
			    nvs_setting_src_name(gsrc[gpu][id] ? (enum nvs_setting_src)gsrc[gpu][id]
							       : NVS_SRC_INHERIT));
	return o;
}

/* ---- capacity lists ---- */

int nvs_parse_capacity_list(const char *s, struct sched_config *cfg)
{
	if (!s)
		return -1;
	uint64_t vals[NVS_MAX_GPUS];
	unsigned n = 0;
	char buf[1024];
	if (strlen(s) >= sizeof buf)
		return -1;
	strcpy(buf, s);
	int list = strchr(buf, ',') != NULL;
	/* strtok_r would skip empty items; walk by hand to keep positions. */
	char *item = buf;
	for (;;) {
		char *comma = strchr(item, ',');
		if (comma)
			*comma = '\0';
		if (n >= NVS_MAX_GPUS)
			return -1;
		char *t = item;
		while (isspace((unsigned char)*t))
			t++;
		if (*t == '\0' || !strcasecmp(t, "auto"))
			vals[n] = 0;
		else if (nvs_parse_size(t, 1, &vals[n]) || vals[n] == 0)
			return -1;
		n++;
		if (!comma)
			break;
		item = comma + 1;
	}
	if (!list) {
		cfg->capacity_all = vals[0];
		return 0;
	}
	for (unsigned i = 0; i < n; i++)
		cfg->capacity[i] = vals[i];
	return 0;
}

/* Exact text, as nvs_parse_capacity_list reads it back: "auto", "N" (N
 * bytes for all), or a list by index up to the last one set
 * ("N,auto,M"). */
static void caps_exact(const struct sched_config *c, char *b, size_t cap)
{
	unsigned last = 0;
	for (unsigned i = 0; i < NVS_MAX_GPUS; i++)
		if (c->capacity[i])
			last = i + 1;
	if (!last) {
		if (c->capacity_all)
			snprintf(b, cap, "%" PRIu64, c->capacity_all);
		else
			snprintf(b, cap, "auto");
		return;
	}
	size_t len = 0;
	b[0] = '\0';
	/* A list of one is written "N,auto" so that it reads back as a list. */
	for (unsigned i = 0; i < last || (last == 1 && i < 2); i++) {
		char one[24] = "auto";
		if (i < last && c->capacity[i])
			snprintf(one, sizeof one, "%" PRIu64, c->capacity[i]);
		int k = snprintf(b + len, cap - len, "%s%s", i ? "," : "", one);
		if (k < 0 || (size_t)k >= cap - len)
			return;
		len += (size_t)k;
	}
}

static void caps_store(struct sched_config *c, const char *text)
{
	c->capacity_all = 0;
	memset(c->capacity, 0, sizeof c->capacity);
	nvs_parse_capacity_list(text, c); /* validated: it parses */
}

int nvs_parse_ms32(const char *s, uint32_t *out)
{
	uint64_t v;
	if (nvs_parse_duration_ms(s, &v) || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* ---- generated texts ---- */

/* The first sentence of a help text (up to ". " or the end). */
static int first_sentence(const char *h)
{
	const char *p = strstr(h, ". ");
	return p ? (int)(p - h + 1) : (int)strlen(h);
}

/* Writes text wrapped at `width`, continuing at column `indent` (where
 * the caller left the cursor), each further line indented as much. */
static void wrap(FILE *f, const char *text, int len, int indent, int width)
{
	const char *p = text, *end = text + len;
	int col = indent;
	while (p < end) {
		while (p < end && *p == ' ')
			p++;
		const char *w = p;
		while (w < end && *w != ' ')
			w++;
		int wl = (int)(w - p);
		if (col > indent && col + 1 + wl > width) {
			fprintf(f, "\n%*s", indent, "");
			col = indent;
		} else if (col > indent) {
			fputc(' ', f);
			col++;
		}
		fprintf(f, "%.*s", wl, p);
		col += wl;
		p = w;
	}
	fputc('\n', f);
}

static void flag_line(int id, char *b, size_t cap)
{
	const struct setting *s = &rows[id];
	char f[80], m[64] = "";
	if (s->sw < 0)
		snprintf(m, sizeof m, " %s", s->meta ? s->meta : "");
	if (s->kind == K_ENUM && s->sw < 0)
		snprintf(m, sizeof m, " %s", s->choices);
	if (s->sopt)
		snprintf(b, cap, "-%c, %s%s", s->sopt, flag_of(id, f, sizeof f), m);
	else
		snprintf(b, cap, "    %s%s", flag_of(id, f, sizeof f), m);
}

static void default_text(const struct setting *s, char *b, size_t cap)
{
	if (s->kind == K_BOOL && !(s->flags & SF_DERIVED)) {
		int on = 0;
		nvs_parse_bool(s->def, &on);
		snprintf(b, cap, "%s", on ? "on" : "off");
	} else {
		snprintf(b, cap, "%s", s->def);
	}
}

void nvs_settings_usage(FILE *f)
{
	fprintf(f,
		"Usage: nvshare-scheduler [options]\n"
		"Hands each GPU to one nvshare client at a time when their memory does not fit.\n"
		"Every option has an environment variable (shown with its default); a flag wins\n"
		"over its variable. See docs/scheduler.md or nvshare-scheduler(8).\n");
	for (unsigned k = 0; k < NITEMS; k++) {
		if (items[k].id < 0) {
			fprintf(f, "\n%s:\n", items[k].group);
			continue;
		}
		int id = items[k].id;
		const struct setting *s = &rows[id];
		char fl[128], d[128], line[256];
		flag_line(id, fl, sizeof fl);
		fprintf(f, "  %-30s", fl);
		if (strlen(fl) >= 30) /* no room: the help on the next line */
			fprintf(f, "\n%32s", "");
		wrap(f, s->help, first_sentence(s->help), 32, 79);
		default_text(s, d, sizeof d);
		if (s->kind == K_BOOL)
			snprintf(line, sizeof line, "%s (%s)", s->env, d);
		else
			snprintf(line, sizeof line, "%s (%s)", s->env, *d ? d : "unset");
		if (s->flags & SF_RUNTIME)
			snprintf(line + strlen(line), sizeof line - strlen(line),
				 "; also at run time (nvsharectl)");
		fprintf(f, "%32s%s\n", "", line); /* unbroken: grep finds "VAR (default)" */
	}
	fprintf(f, "\n  -V, --version                 print the version\n"
		   "  -h, --help                    this text\n"
		   "      --help-table md|man       the settings as the docs' table or a man page\n"
		   "\nLogs go to stderr.\n");
}

/* Markdown cell: '|' escaped, no line breaks. */
static void md_cell(FILE *f, const char *t)
{
	for (; *t; t++) {
		if (*t == '|')
			fputs("\\|", f);
		else
			fputc(*t == '\n' ? ' ' : *t, f);
	}
}

/* A row's texts for the docs and the man page. */
struct row_texts {
	const char *flag; /* "-t, --tq TIME", no leading blanks */
	char fl[128], def[128], range[256];
};

static void texts_of(int id, struct row_texts *t)
{
	flag_line(id, t->fl, sizeof t->fl);
	t->flag = t->fl;
	while (*t->flag == ' ')
		t->flag++;
	default_text(&rows[id], t->def, sizeof t->def);
	range_text(&rows[id], t->range, sizeof t->range);
}

static void print_md(FILE *f)
{
	for (unsigned k = 0; k < NITEMS; k++) {
		if (items[k].id < 0) {
			fprintf(f,
				"%s**%s**\n\n| flag | environment | default | valid | run time | "
				"meaning |\n|---|---|---|---|---|---|\n",
				k ? "\n" : "", items[k].group);
			continue;
		}
		const struct setting *s = &rows[items[k].id];
		struct row_texts t;
		texts_of(items[k].id, &t);
		const char *d = t.def;
		fputs("| `", f);
		md_cell(f, t.flag);
		fprintf(f, "` | `%s` | ", s->env);
		if (*d) {
			fputs((s->flags & SF_DERIVED) ? "" : "`", f);
			md_cell(f, d);
			fputs((s->flags & SF_DERIVED) ? "" : "`", f);
		} else {
			fputs("unset", f);
		}
		fputs(" | ", f);
		md_cell(f, t.range);
		fprintf(f, " | %s | ",
			!(s->flags & SF_RUNTIME) ? ""
			: (s->flags & SF_GPU)	 ? "all GPUs or one"
						 : "all GPUs");
		md_cell(f, s->help);
		fputs(" |\n", f);
	}
}

/* roff text: backslashes doubled, '-' as \- , a leading '.' or '\'' guarded. */
static void roff(FILE *f, const char *t)
{
	if (*t == '.' || *t == '\'')
		fputs("\\&", f);
	for (; *t; t++) {
		if (*t == '\\')
			fputs("\\e", f);
		else if (*t == '-')
			fputs("\\-", f);
		else
			fputc(*t, f);
	}
}

static void print_man(FILE *f, const char *version)
{
	fprintf(
	    f,
	    ".\\\" Generated by nvshare-scheduler --help-table=man from scheduler/settings.def\n"
	    ".TH NVSHARE\\-SCHEDULER 8 \"\" \"nvshare %.*s\" \"System Administration\"\n"
	    ".SH NAME\n"
	    "nvshare\\-scheduler \\- share GPUs between processes and Pods, one at a time "
	    "when their memory does not fit\n"
	    ".SH SYNOPSIS\n"
	    ".B nvshare\\-scheduler\n"
	    "[\\fIoptions\\fR]\n"
	    ".SH DESCRIPTION\n"
	    "The node daemon of nvshare. Processes that load \\fBlibnvshare.so\\fR connect "
	    "to it; for each GPU it decides whether they run together or take turns, and "
	    "hands the GPU's lock from one to the next. Run one per node, as root.\n"
	    ".PP\n"
	    "Every option has an environment variable; a flag wins over its variable. A "
	    "bad value of either stops the start with exit status 2 and a message naming "
	    "it, the value and what is valid. Settings changed at run time with "
	    "\\fBnvsharectl\\fR(8) are kept in the state file and restored at the next "
	    "start, unless the configuration changed since; \\fBnvsharectl \\-\\-settings\\fR "
	    "shows each setting's value and where it came from.\n"
	    ".SH OPTIONS\n",
	    (int)strcspn(version, " "), version); /* the release, not "(protocol N)" */
	for (unsigned k = 0; k < NITEMS; k++) {
		if (items[k].id < 0) {
			fputs(".SS ", f);
			roff(f, items[k].group);
			fputc('\n', f);
			continue;
		}
		const struct setting *s = &rows[items[k].id];
		struct row_texts t;
		texts_of(items[k].id, &t);
		fputs(".TP\n.B ", f);
		roff(f, t.flag);
		fputc('\n', f);
		roff(f, s->help);
		fputs("\n.br\nVariable: \\fB", f);
		roff(f, s->env);
		fputs("\\fR. Default: ", f);
		roff(f, *t.def ? t.def : "unset");
		fputs(". Valid: ", f);
		roff(f, t.range);
		fputs(".", f);
		if (s->flags & SF_RUNTIME)
			fprintf(f, " Changed at run time by nvsharectl (%s).",
				(s->flags & SF_GPU) ? "all GPUs or one" : "all GPUs");
		fputc('\n', f);
	}
	fprintf(
	    f,
	    ".TP\n.B \\-V, \\-\\-version\nPrint the version.\n"
	    ".TP\n.B \\-h, \\-\\-help\nList the options.\n"
	    ".TP\n.B \\-\\-help\\-table md|man\nPrint the settings as the documentation's table "
	    "or as this page.\n"
	    ".SH EXIT STATUS\n0 after SIGTERM or SIGINT; 1 when it cannot start (socket in "
	    "use, directory not writable); 2 on a usage error or a bad setting.\n"
	    ".SH FILES\n.TP\n.I %s/%s\nThe client socket, mounted into Pods.\n"
	    ".TP\n.I %s/%s\nThe admin socket, for nvsharectl.\n"
	    ".TP\n.I %s\nThe state file: run-time settings kept across restarts.\n"
	    ".SH SEE ALSO\n\\fBnvsharectl\\fR(8), \\fBnvshare\\-device\\-plugin\\fR(8); "
	    "docs/scheduler.md, docs/security.md\n",
	    NVS_DEFAULT_SOCK_DIR, NVS_SOCK_NAME, NVS_DEFAULT_ADMIN_SOCK_DIR, NVS_ADMIN_SOCK_NAME,
	    NVS_DEFAULT_STATE_FILE);
}

int nvs_settings_print_table(FILE *f, const char *format, const char *version)
{
	if (!strcmp(format, "md"))
		print_md(f);
	else if (!strcmp(format, "man"))
		print_man(f, version);
	else
		return -1;
	return 0;
}
