#include "status_view.h"

#include "parse.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static double numv(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *strv(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : "";
}

static const char *size(const cJSON *o, const char *k, char *b, size_t cap)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	if (!cJSON_IsNumber(v))
		return "-";
	return nvs_format_size((uint64_t)v->valuedouble, b, cap);
}

static const char *secs(double ms, char *b, size_t cap)
{
	if (ms < 1000)
		snprintf(b, cap, "%.0fms", ms);
	else
		snprintf(b, cap, "%.1fs", ms / 1000);
	return b;
}

static void who(const cJSON *w, char *b, size_t cap)
{
	snprintf(b, cap, "%.0f/%.0f", numv(w, "client"), numv(w, "pid"));
}

/* Swap counters (docs/swap.md), only for clients that swapped. */
static void print_swap(FILE *f, const cJSON *clients)
{
	int hdr = 0;
	const cJSON *c, *x;
	cJSON_ArrayForEach(c, clients)
	{
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(c, "gpus"))
		{
			const cJSON *sw = cJSON_GetObjectItemCaseSensitive(x, "swap");
			double bi = numv(sw, "bytes_in"), bo = numv(sw, "bytes_out");
			double ni = numv(sw, "ns_in"), no = numv(sw, "ns_out");
			if (bi == 0 && bo == 0 && ni == 0 && no == 0)
				continue;
			if (!hdr++)
				fprintf(f, "\n%-6s %-4s %-9s %-9s %-9s %-9s %s\n", "SWAP", "GPU",
					"IN", "IN-TIME", "OUT", "OUT-TIME", "IN GB/s");
			char b1[32], b2[32], b3[32], b4[32], r[32] = "-";
			if (ni > 0)
				snprintf(r, sizeof r, "%.1f", bi / ni);
			fprintf(f, "%-6.0f %-4.0f %-9s %-9s %-9s %-9s %s\n", numv(c, "id"),
				numv(x, "gpu"), nvs_format_size((uint64_t)bi, b1, sizeof b1),
				secs(ni / 1e6, b2, sizeof b2),
				nvs_format_size((uint64_t)bo, b3, sizeof b3),
				secs(no / 1e6, b4, sizeof b4), r);
		}
	}
}

/* Where each client's memory goes when it swaps (docs/swap.md), for clients
 * that reported it. */
static void print_swap_paths(FILE *f, const cJSON *clients)
{
	int hdr = 0;
	const cJSON *c, *x;
	cJSON_ArrayForEach(c, clients)
	{
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(c, "gpus"))
		{
			const cJSON *sw = cJSON_GetObjectItemCaseSensitive(x, "swap");
			double fa = numv(sw, "fast_bytes"), pf = numv(sw, "prefetch_bytes");
			double pi = numv(sw, "pinned_bytes"), st = numv(sw, "staging_bytes");
			double su = numv(sw, "staging_used_bytes");
			if (fa == 0 && pf == 0 && pi == 0 && st == 0)
				continue;
			if (!hdr++)
				fprintf(f, "\n%-6s %-4s %-9s %-9s %-9s %-19s %s\n", "PATHS", "GPU",
					"FAST", "PREFETCH", "PINNED", "STAGING USED/HELD", "NOTE");
			char b1[32], b2[32], b3[32], b4[32], b5[32], stg[48];
			snprintf(stg, sizeof stg, "%s/%s",
				 nvs_format_size((uint64_t)su, b4, sizeof b4),
				 nvs_format_size((uint64_t)st, b5, sizeof b5));
			const cJSON *pfail =
			    cJSON_GetObjectItemCaseSensitive(sw, "staging_pin_failed");
			const cJSON *trap = cJSON_GetObjectItemCaseSensitive(sw, "trap_mode");
			fprintf(f, "%-6.0f %-4.0f %-9s %-9s %-9s %-19s %s%s\n", numv(c, "id"),
				numv(x, "gpu"), nvs_format_size((uint64_t)fa, b1, sizeof b1),
				nvs_format_size((uint64_t)pf, b2, sizeof b2),
				nvs_format_size((uint64_t)pi, b3, sizeof b3), stg,
				cJSON_IsTrue(pfail) ? "pinning refused " : "",
				cJSON_IsTrue(trap) ? "trap mode" : "");
		}
	}
}

/* Compute quotas (docs/quotas.md), only for clients with a core limit. */
static void print_quota(FILE *f, const cJSON *clients)
{
	int hdr = 0;
	const cJSON *c, *x;
	cJSON_ArrayForEach(c, clients)
	{
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(c, "gpus"))
		{
			const cJSON *q = cJSON_GetObjectItemCaseSensitive(x, "quota");
			if (!cJSON_IsObject(q) || numv(q, "limit") >= 100)
				continue;
			if (!hdr++)
				fprintf(f, "\n%-6s %-8s %-4s %-6s %-9s %-9s %-9s %-9s %s\n",
					"QUOTA", "PID", "GPU", "LIMIT", "EFFECTIVE", "USED-NOW",
					"USED-LAST", "THROTTLED", "STATE");
			char lim[16], eff[16], now[16], last[16], thr[32];
			snprintf(lim, sizeof lim, "%.0f%%", numv(q, "limit"));
			snprintf(eff, sizeof eff, "%.1f%%", numv(q, "effective_pct"));
			snprintf(now, sizeof now, "%.1f%%", 100 * numv(q, "share_current"));
			snprintf(last, sizeof last, "%.1f%%", 100 * numv(q, "share_last"));
			secs(numv(q, "throttled_ns") / 1e6, thr, sizeof thr);
			int th = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(q, "throttled"));
			fprintf(f, "%-6.0f %-8.0f %-4.0f %-6s %-9s %-9s %-9s %-9s %s\n",
				numv(c, "id"), numv(c, "pid"), numv(x, "gpu"), lim, eff, now, last,
				thr, th ? "throttled" : strv(x, "state"));
		}
	}
}

/* The value of a per-GPU setting in a GPU's status entry, as text. */
static const char *gpu_setting(const cJSON *g, const char *name, char *b, size_t cap)
{
	if (!strcmp(name, "mode"))
		return strv(g, "mode");
	if (!strcmp(name, "tq"))
		return secs(numv(g, "tq_ms"), b, cap);
	if (!strcmp(name, "capacity"))
		return size(g, "capacity", b, cap);
	return "?";
}

int nvs_settings_print(FILE *f, const char *json, size_t len, int as_json)
{
	cJSON *root = cJSON_ParseWithLength(json, len);
	const cJSON *set = cJSON_GetObjectItemCaseSensitive(root, "settings"), *e;
	if (!cJSON_IsObject(set)) {
		fprintf(stderr, "nvsharectl: the scheduler's status has no settings (not valid "
				"JSON, or a scheduler older than this nvsharectl)\n");
		cJSON_Delete(root);
		return -1;
	}
	if (as_json) {
		char *s = cJSON_PrintUnformatted(set);
		if (s)
			fprintf(f, "%s\n", s);
		free(s);
		cJSON_Delete(root);
		return s ? 0 : -1;
	}
	fprintf(f, "%-28s %-20s %-12s %s\n", "SETTING", "VALUE", "SOURCE",
		"CONFIGURED (run-time settings)");
	cJSON_ArrayForEach(e, set)
	{
		char conf[128] = "";
		if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "configured_text")))
			snprintf(conf, sizeof conf, "%s (%s)", strv(e, "configured_text"),
				 strv(e, "configured_source"));
		const char *t = strv(e, "text");
		fprintf(f, "%-28s %-20s %-12s %s\n", e->string, *t ? t : "-", strv(e, "source"),
			conf);
	}
	/* GPUs that do not follow the value for all GPUs. */
	const cJSON *g;
	cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(root, "gpus"))
	{
		const cJSON *src;
		cJSON_ArrayForEach(src, cJSON_GetObjectItemCaseSensitive(g, "sources"))
		{
			char b[32];
			if (!cJSON_IsString(src) || !strcmp(src->valuestring, "all-gpus"))
				continue;
			fprintf(f, "GPU %.0f: %s %s (%s)\n", numv(g, "index"), src->string,
				gpu_setting(g, src->string, b, sizeof b), src->valuestring);
		}
	}
	cJSON_Delete(root);
	return 0;
}

/* One line: the settings whose value is not their default, with where
 * it comes from (nvsharectl --settings lists all). */
static void print_changed(FILE *f, const cJSON *root)
{
	const cJSON *set = cJSON_GetObjectItemCaseSensitive(root, "settings"), *e;
	int n = 0;
	cJSON_ArrayForEach(e, set)
	{
		if (!strcmp(strv(e, "source"), "default"))
			continue;
		fprintf(f, "%s %s %s (%s)",
			n++ ? "," : "settings not at their defaults:", e->string, strv(e, "text"),
			strv(e, "source"));
	}
	if (n)
		fprintf(f, "; nvsharectl --settings lists all\n");
}

int nvs_status_print(FILE *f, const char *json, size_t len)
{
	cJSON *root = cJSON_ParseWithLength(json, len);
	if (!root) {
		fprintf(stderr, "nvsharectl: the scheduler's status is not valid JSON\n");
		return -1;
	}
	const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(root, "gpus");
	const cJSON *clients = cJSON_GetObjectItemCaseSensitive(root, "clients");
	/* The tenant view (client socket) has no scheduler-wide facts and no
	 * one else's clients: say whose view it is instead. */
	int tenant = !strcmp(strv(root, "view"), "tenant");
	if (tenant) {
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "tenant");
		char who_b[96];
		if (!strcmp(strv(t, "kind"), "pod"))
			snprintf(who_b, sizeof who_b, "Pod %s", strv(t, "pod_uid"));
		else if (!strcmp(strv(t, "kind"), "uid"))
			snprintf(who_b, sizeof who_b, "uid %.0f", numv(t, "uid"));
		else
			snprintf(who_b, sizeof who_b, "unknown (%s)", strv(t, "why"));
		fprintf(f,
			"nvshare-scheduler %s, socket %s: tenant view for %s (your clients "
			"only)\n",
			strv(root, "version"), strv(root, "socket"), who_b);
	} else {
		fprintf(f, "nvshare-scheduler %s, pid %.0f, socket %s, admin socket %s, NVML %s\n",
			strv(root, "version"), numv(root, "pid"), strv(root, "socket"),
			strv(root, "admin_socket"),
			cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "nvml")) ? "yes"
										     : "no");
		print_changed(f, root);
	}
	fprintf(f, "\n%-4s %-5s %-6s %-7s %-9s %-9s %-9s %-12s %-8s %s\n", "GPU", "MODE", "SERIAL",
		"TQ", "CAPACITY", "ALLOC", "MEMORY", "HOLDER", "HANDOFF", "QUEUE (client/pid)");
	int n = 0;
	const cJSON *g;
	cJSON_ArrayForEach(g, gpus)
	{
		char b1[32], b2[32], b3[32], b4[32], h[48] = "-", q[256] = "";
		const cJSON *holder = cJSON_GetObjectItemCaseSensitive(g, "holder");
		if (cJSON_IsObject(holder))
			who(holder, h, sizeof h);
		const cJSON *w;
		cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(g, "queue"))
		{
			char one[48];
			who(w, one, sizeof one);
			if (strlen(q) + strlen(one) + 2 < sizeof q) {
				if (*q)
					strcat(q, " ");
				strcat(q, one);
			}
		}
		/* The tenant view has no handoff count: "-", not 0. */
		char ho[24] = "-";
		if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(g, "handoffs")))
			snprintf(ho, sizeof ho, "%.0f", numv(g, "handoffs"));
		fprintf(f, "%-4.0f %-5s %-6s %-7s %-9s %-9s %-9s %-12s %-8s %s\n", numv(g, "index"),
			strv(g, "mode"),
			cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(g, "serialized")) ? "yes"
											: "no",
			secs(numv(g, "tq_ms"), b4, sizeof b4), size(g, "capacity", b1, sizeof b1),
			size(g, "allocated", b2, sizeof b2), size(g, "total_memory", b3, sizeof b3),
			h, ho, *q ? q : "-");
		n++;
	}
	if (!n)
		fprintf(f, "(no GPUs known yet: NVML absent and no client attached)\n");
	/* Co-scheduling (admin view): who runs together on a serialized GPU,
	 * and why; preemptions by reason. */
	cJSON_ArrayForEach(g, gpus)
	{
		const cJSON *rs = cJSON_GetObjectItemCaseSensitive(g, "running_set");
		if (!cJSON_IsArray(rs) ||
		    !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(g, "serialized")))
			continue;
		fprintf(f, "GPU %.0f running set:", numv(g, "index"));
		const cJSON *m;
		int k = 0;
		cJSON_ArrayForEach(m, rs)
		{
			char one[48];
			who(m, one, sizeof one);
			fprintf(f, " %s %s %s (%s)", one, strv(m, "role"), strv(m, "class"),
				strv(m, "why"));
			k++;
		}
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(g, "preemptions");
		fprintf(f,
			"%s; preemptions: interactive %.0f, batch floor %.0f, quantum %.0f, "
			"overcommit %.0f; batch share %.0f%%\n",
			k ? "" : " (nobody)", numv(p, "interactive"), numv(p, "batch_floor"),
			numv(p, "tq_expired"), numv(p, "overcommit"), numv(g, "batch_share_pct"));
	}
	fprintf(f, "\n%-6s %-8s %-6s %-16s %-4s %-9s %-8s %-9s %s\n", "CLIENT", "PID", "UID",
		"NAME", "GPU", "MEMORY", "STATE", "HELD", "LIMITS (core, memory)");
	n = 0;
	const cJSON *c;
	cJSON_ArrayForEach(c, clients)
	{
		const cJSON *x;
		int any = 0;
		/* Pod (namespace/name) from the scheduler's watch, last. */
		char pod[330] = "";
		const cJSON *pj = cJSON_GetObjectItemCaseSensitive(c, "pod");
		if (cJSON_IsObject(pj))
			snprintf(pod, sizeof pod, "  pod %s/%s",
				 *strv(pj, "namespace") ? strv(pj, "namespace") : "?",
				 *strv(pj, "name") ? strv(pj, "name") : strv(pj, "uid"));
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(c, "gpus"))
		{
			char b1[32], b2[32], b3[32];
			const cJSON *l = cJSON_GetObjectItemCaseSensitive(x, "limits");
			fprintf(
			    f, "%-6.0f %-8.0f %-6.0f %-16.16s %-4.0f %-9s %-8s %-9s %.0f%%, %s%s\n",
			    numv(c, "id"), numv(c, "pid"), numv(c, "uid"), strv(c, "claimed_name"),
			    numv(x, "gpu"), size(x, "allocated", b1, sizeof b1), strv(x, "state"),
			    secs(numv(x, "held_ns") / 1e6, b2, sizeof b2), numv(l, "core_limit"),
			    cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(l, "mem_limit"))
				? size(l, "mem_limit", b3, sizeof b3)
				: "none",
			    pod);
			any = 1;
		}
		if (!any)
			fprintf(f, "%-6.0f %-8.0f %-6.0f %-16.16s %-4s%s\n", numv(c, "id"),
				numv(c, "pid"), numv(c, "uid"), strv(c, "claimed_name"), "-", pod);
		n++;
	}
	if (!n)
		fprintf(f, "(no clients)\n");
	print_swap(f, clients);
	print_swap_paths(f, clients);
	print_quota(f, clients);
	cJSON_Delete(root);
	return 0;
}
