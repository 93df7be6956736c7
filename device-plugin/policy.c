/* Virtual device IDs and allocation policy (see policy.h). */
#include "policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int nvs_dp_policy_parse(const char *s, enum nvs_dp_policy *out)
{
	if (!s)
		return -1;
	if (!strcasecmp(s, "spread") || !strcasecmp(s, "distributed")) {
		*out = NVS_DP_SPREAD;
		return 0;
	}
	if (!strcasecmp(s, "pack") || !strcasecmp(s, "packed")) {
		*out = NVS_DP_PACK;
		return 0;
	}
	return -1;
}

const char *nvs_dp_policy_name(enum nvs_dp_policy p)
{
	return p == NVS_DP_PACK ? "pack" : "spread";
}

int nvs_dp_format_id(char *buf, size_t cap, const char *uuid, unsigned slice)
{
	int n = snprintf(buf, cap, "%s" NVS_DP_ID_SEP "%u", uuid, slice);
	if (n < 0 || (size_t)n >= cap || n >= NVS_DP_ID_MAX)
		return -1;
	return 0;
}

int nvs_dp_parse_id(const char *id, char *uuid, size_t cap, unsigned *slice)
{
	if (!id)
		return -1;
	const char *sep = NULL;
	for (const char *p = strstr(id, NVS_DP_ID_SEP); p; p = strstr(p + 1, NVS_DP_ID_SEP))
		sep = p;
	if (!sep || sep == id)
		return -1;
	const char *num = sep + strlen(NVS_DP_ID_SEP);
	size_t nd = strspn(num, "0123456789");
	if (nd == 0 || nd > 5 || num[nd] != '\0' || num[0] == '0')
		return -1;
	size_t ulen = (size_t)(sep - id);
	if (ulen >= cap || ulen >= NVS_DP_ID_MAX)
		return -1;
	memcpy(uuid, id, ulen);
	uuid[ulen] = '\0';
	*slice = (unsigned)strtoul(num, NULL, 10);
	return 0;
}

struct entry {
	const char *id;
	char uuid[NVS_DP_ID_MAX];
	unsigned slice;
	int taken;
};

static int entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = strcmp(x->uuid, y->uuid);
	if (c)
		return c;
	return (x->slice > y->slice) - (x->slice < y->slice);
}

/* The parseable ids of avail as entries in e (room for n_avail), in avail's
 * order; returns how many. Both preferred-allocation policies start from
 * this, then sort by GPU and slice (entry_cmp). */
static size_t collect_entries(const char *const *avail, size_t n_avail, struct entry *e)
{
	size_t n = 0;
	for (size_t i = 0; i < n_avail; i++) {
		if (!avail[i] || nvs_dp_parse_id(avail[i], e[n].uuid, NVS_DP_ID_MAX, &e[n].slice))
			continue;
		e[n].id = avail[i];
		n++;
	}
	return n;
}

static int already_out(const char **out, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(out[i], id))
			return 1;
	return 0;
}

int nvs_dp_prefer(enum nvs_dp_policy policy, const char *const *avail, size_t n_avail,
		  const char *const *must_include, size_t n_must, size_t size, const char **out)
{
	if ((n_avail && !avail) || (n_must && !must_include) || (size && !out))
		return -1;
	size_t n_out = 0;
	struct entry *e = calloc(n_avail ? n_avail : 1, sizeof *e);
	/* GPUs that already have a slice in this round of choices. */
	char(*chosen)[NVS_DP_ID_MAX] = calloc(n_avail + n_must + 1, NVS_DP_ID_MAX);
	if (!e || !chosen) {
		free(e);
		free(chosen);
		return -1;
	}
	size_t n_e = collect_entries(avail, n_avail, e), n_chosen = 0;
	qsort(e, n_e, sizeof *e, entry_cmp);

	for (size_t i = 0; i < n_must && n_out < size; i++) {
		const char *id = must_include[i];
		if (!id || already_out(out, n_out, id))
			continue;
		out[n_out++] = id;
		for (size_t j = 0; j < n_e; j++)
			if (!strcmp(e[j].id, id))
				e[j].taken = 1;
		char uuid[NVS_DP_ID_MAX];
		unsigned slice;
		if (!nvs_dp_parse_id(id, uuid, sizeof uuid, &slice))
			memcpy(chosen[n_chosen++], uuid, sizeof uuid);
	}

	while (n_out < size) {
		/* Groups of equal UUID are contiguous: pick the best group. */
		size_t best = (size_t)-1, best_free = 0, any_free = 0;
		for (size_t g = 0; g < n_e;) {
			size_t end = g, nfree = 0, first = (size_t)-1;
			while (end < n_e && !strcmp(e[end].uuid, e[g].uuid)) {
				if (!e[end].taken) {
					nfree++;
					if (first == (size_t)-1)
						first = end;
				}
				end++;
			}
			any_free += nfree;
			int is_chosen = 0;
			for (size_t c = 0; c < n_chosen; c++)
				if (!strcmp(chosen[c], e[g].uuid))
					is_chosen = 1;
			if (nfree && !is_chosen) {
				/* Strict comparison: ties keep the smaller UUID,
				 * which sorts first. */
				int better =
				    best == (size_t)-1 ||
				    (policy == NVS_DP_PACK ? nfree < best_free : nfree > best_free);
				if (better) {
					best = first;
					best_free = nfree;
				}
			}
			g = end;
		}
		if (best == (size_t)-1) {
			if (!any_free)
				break;
			/* Every GPU has a slice already: start another round. */
			n_chosen = 0;
			continue;
		}
		e[best].taken = 1;
		out[n_out++] = e[best].id;
		memcpy(chosen[n_chosen++], e[best].uuid, NVS_DP_ID_MAX);
	}
	free(e);
	free(chosen);
	return (int)n_out;
}

int nvs_dp_check_request(const char *const *ids, size_t n_ids, char (*uuids)[NVS_DP_ID_MAX],
			 size_t cap_uuids, char *err, size_t errcap)
{
	size_t n = 0;
	if (n_ids == 0) {
		snprintf(err, errcap, "no device IDs in the request");
		return -1;
	}
	for (size_t i = 0; i < n_ids; i++) {
		char uuid[NVS_DP_ID_MAX];
		unsigned slice;
		if (!ids[i] || nvs_dp_parse_id(ids[i], uuid, sizeof uuid, &slice)) {
			snprintf(err, errcap,
				 "device ID \"%.*s\" is not of the form <GPU UUID>__<n>",
				 NVS_DP_ID_MAX, ids[i] ? ids[i] : "(null)");
			return -1;
		}
		for (size_t j = 0; j < n; j++) {
			if (!strcmp(uuids[j], uuid)) {
				/* Name the earlier ID of the same GPU too. */
				const char *first = "";
				for (size_t k = 0; k < i; k++) {
					char u2[NVS_DP_ID_MAX];
					unsigned s2;
					if (!nvs_dp_parse_id(ids[k], u2, sizeof u2, &s2) &&
					    !strcmp(u2, uuid)) {
						first = ids[k];
						break;
					}
				}
				snprintf(err, errcap,
					 "%.*s and %.*s are slices of the same GPU %.*s: a "
					 "container may use at most one slice of each GPU "
					 "(nvshare shares whole GPUs; request one device per GPU)",
					 NVS_DP_ID_MAX, first, NVS_DP_ID_MAX, ids[i], NVS_DP_ID_MAX,
					 uuid);
				return -1;
			}
		}
		if (n >= cap_uuids) {
			snprintf(err, errcap, "too many GPUs in one request (%zu)", n_ids);
			return -1;
		}
		memcpy(uuids[n++], uuid, NVS_DP_ID_MAX);
	}
	return (int)n;
}

/* ---- memory units ---- */

/* Per GPU: how many of avail are on it, and of must_include. */
struct unit_gpu {
	char uuid[NVS_DP_ID_MAX];
	size_t nfree, nmust;
};

static struct unit_gpu *unit_gpu_of(struct unit_gpu *g, size_t *n, const char *uuid)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp(g[i].uuid, uuid))
			return &g[i];
	memcpy(g[*n].uuid, uuid, NVS_DP_ID_MAX);
	g[*n].nfree = g[*n].nmust = 0;
	return &g[(*n)++];
}

/* Whether GPU a goes before GPU b as the policy says (for `size` units). */
static int unit_gpu_better(enum nvs_dp_policy policy, const struct unit_gpu *a,
			   const struct unit_gpu *b, size_t size)
{
	if (a->nmust != b->nmust)
		return a->nmust > b->nmust;
	int fa = a->nfree >= size, fb = b->nfree >= size;
	if (fa != fb)
		return fa;
	if (a->nfree != b->nfree) {
		/* Nobody fits: the GPU with the most units takes most of them. */
		if (policy == NVS_DP_PACK && fa)
			return a->nfree < b->nfree;
		return a->nfree > b->nfree;
	}
	return strcmp(a->uuid, b->uuid) < 0;
}

int nvs_dp_prefer_units(enum nvs_dp_policy policy, const char *const *avail, size_t n_avail,
			const char *const *must_include, size_t n_must, size_t size,
			const char **out)
{
	if ((n_avail && !avail) || (n_must && !must_include) || (size && !out))
		return -1;
	struct entry *e = calloc(n_avail ? n_avail : 1, sizeof *e);
	struct unit_gpu *g = calloc(n_avail + n_must + 1, sizeof *g);
	size_t *order = calloc(n_avail + n_must + 1, sizeof *order);
	if (!e || !g || !order) {
		free(e);
		free(g);
		free(order);
		return -1;
	}
	size_t n_e = collect_entries(avail, n_avail, e), n_g = 0, n_out = 0;
	for (size_t j = 0; j < n_e; j++) /* GPUs in avail's order */
		unit_gpu_of(g, &n_g, e[j].uuid)->nfree++;
	qsort(e, n_e, sizeof *e, entry_cmp);
	for (size_t i = 0; i < n_must && n_out < size; i++) {
		const char *id = must_include[i];
		if (!id || already_out(out, n_out, id))
			continue;
		out[n_out++] = id;
		char uuid[NVS_DP_ID_MAX];
		unsigned slice;
		if (!nvs_dp_parse_id(id, uuid, sizeof uuid, &slice))
			unit_gpu_of(g, &n_g, uuid)->nmust++;
		for (size_t j = 0; j < n_e; j++)
			if (!strcmp(e[j].id, id) && !e[j].taken) {
				e[j].taken = 1;
				unit_gpu_of(g, &n_g, e[j].uuid)->nfree--;
			}
	}
	/* GPUs in the order they are filled (insertion sort: few GPUs). */
	size_t need = size - n_out;
	for (size_t i = 0; i < n_g; i++) {
		size_t k = i;
		while (k && unit_gpu_better(policy, &g[i], &g[order[k - 1]], need)) {
			order[k] = order[k - 1];
			k--;
		}
		order[k] = i;
	}
	for (size_t o = 0; o < n_g && n_out < size; o++)
		for (size_t j = 0; j < n_e && n_out < size; j++)
			if (!e[j].taken && !strcmp(e[j].uuid, g[order[o]].uuid)) {
				e[j].taken = 1;
				out[n_out++] = e[j].id;
			}
	free(e);
	free(g);
	free(order);
	return (int)n_out;
}

int nvs_dp_units_gpu(const char *const *ids, size_t n_ids, char uuid[NVS_DP_ID_MAX], size_t *on_gpu,
		     char *err, size_t errcap)
{
	if (n_ids == 0) {
		snprintf(err, errcap, "no device IDs in the request");
		return -1;
	}
	struct unit_gpu *g = calloc(n_ids, sizeof *g);
	if (!g) {
		snprintf(err, errcap, "out of memory");
		return -1;
	}
	size_t n_g = 0;
	for (size_t i = 0; i < n_ids; i++) {
		char u[NVS_DP_ID_MAX];
		unsigned k;
		if (!ids[i] || nvs_dp_parse_id(ids[i], u, sizeof u, &k)) {
			snprintf(err, errcap,
				 "device ID \"%.*s\" is not of the form <GPU UUID>__<n>",
				 NVS_DP_ID_MAX, ids[i] ? ids[i] : "(null)");
			free(g);
			return -1;
		}
		unit_gpu_of(g, &n_g, u)->nfree++;
	}
	size_t best = 0;
	for (size_t i = 1; i < n_g; i++)
		if (g[i].nfree > g[best].nfree)
			best = i;
	memcpy(uuid, g[best].uuid, NVS_DP_ID_MAX);
	*on_gpu = g[best].nfree;
	free(g);
	return (int)n_g;
}
