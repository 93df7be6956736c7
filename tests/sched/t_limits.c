/*
 * The precedence of limits (docs/quotas.md "Setting limits"), in process
 * on the one function that resolves them (scheduler/core/limit_resolve.c): per
 * field, nvsharectl -g N > nvsharectl > annotation > min(request, HELLO)
 * for memory, HELLO for core > none; a LIMITS_IN_FORCE claim and the
 * binding's ceiling only lower. End to end (a scheduler, a Pod watch, a
 * client on two GPUs): tests/k8s_watch/t_limits.sh.
 */
#include "harness.h"
#include "protocol.h"
#include "scheduler/core/limit_resolve.h"

#include <stdint.h>

#define MI (1ull << 20)
#define GI (1ull << 30)
#define NONE NVS_NO_LIMIT

/* A client that set nothing: HELLO's "none" values. */
static struct nvs_limit_sources none(void)
{
	struct nvs_limit_sources s;
	memset(&s, 0, sizeof s);
	s.hello_core = 100;
	s.hello_mem = NONE;
	return s;
}

static void expect(const char *what, const struct nvs_limit_sources *s, uint32_t core,
		   enum nvs_limit_from cf, uint64_t mem, enum nvs_limit_from mf)
{
	struct nvs_limits l = nvs_limits_resolve(s);
	tap(l.core == core && l.core_from == cf && l.mem == mem && l.mem_from == mf,
	    "%s: core %u (%s), memory %llu (%s) [want %u (%s), %llu (%s)]", what, l.core,
	    nvs_limit_from_name(l.core_from), (unsigned long long)l.mem,
	    nvs_limit_from_name(l.mem_from), core, nvs_limit_from_name(cf), (unsigned long long)mem,
	    nvs_limit_from_name(mf));
}

int main(void)
{
	struct nvs_limit_sources s = none();
	expect("nothing set: 100 %, no memory limit", &s, 100, NVS_LIMIT_FROM_DEFAULT, NONE,
	       NVS_LIMIT_FROM_DEFAULT);

	s.hello_core = 70;
	s.hello_mem = 1 * GI;
	expect("HELLO alone", &s, 70, NVS_LIMIT_FROM_HELLO, 1 * GI, NVS_LIMIT_FROM_HELLO);

	s.request = 2 * GI;
	expect("a request above HELLO's memory: HELLO's lowers it", &s, 70, NVS_LIMIT_FROM_HELLO,
	       1 * GI, NVS_LIMIT_FROM_HELLO);
	s.request = 512 * MI;
	expect("a request below HELLO's memory: the request (HELLO never raises it)", &s, 70,
	       NVS_LIMIT_FROM_HELLO, 512 * MI, NVS_LIMIT_FROM_REQUEST);
	s.hello_mem = NONE;
	expect("a request and no HELLO memory limit: the request", &s, 70, NVS_LIMIT_FROM_HELLO,
	       512 * MI, NVS_LIMIT_FROM_REQUEST);

	s.annot_core = 40;
	s.has_annot_mem = 1;
	s.annot_mem = 4 * GI;
	expect("annotations beat HELLO and the request, up or down", &s, 40,
	       NVS_LIMIT_FROM_ANNOTATION, 4 * GI, NVS_LIMIT_FROM_ANNOTATION);

	s.ctl_core = 20;
	expect("each field on its own: ctl core, annotation memory", &s, 20, NVS_LIMIT_FROM_CTL,
	       4 * GI, NVS_LIMIT_FROM_ANNOTATION);
	s.has_ctl_mem = 1;
	s.ctl_mem = NONE;
	expect("ctl memory 'none' beats the annotation's 4Gi", &s, 20, NVS_LIMIT_FROM_CTL, NONE,
	       NVS_LIMIT_FROM_CTL);

	s.gpu_core = 90;
	s.has_gpu_mem = 1;
	s.gpu_mem = 256 * MI;
	expect("ctl -g N beats client-wide ctl, up or down", &s, 90, NVS_LIMIT_FROM_CTL_GPU,
	       256 * MI, NVS_LIMIT_FROM_CTL_GPU);

	/* --core-limit default -g N: that GPU's value goes; what is left is
	 * the client-wide ctl value, else the annotation, else HELLO. */
	s.gpu_core = 0;
	expect("-g N default: back to the client-wide ctl value", &s, 20, NVS_LIMIT_FROM_CTL,
	       256 * MI, NVS_LIMIT_FROM_CTL_GPU);
	s.ctl_core = 0;
	expect("-g N default, no client-wide value: back to the annotation (not HELLO)", &s, 40,
	       NVS_LIMIT_FROM_ANNOTATION, 256 * MI, NVS_LIMIT_FROM_CTL_GPU);
	s.annot_core = 0;
	expect("... no annotation either: HELLO", &s, 70, NVS_LIMIT_FROM_HELLO, 256 * MI,
	       NVS_LIMIT_FROM_CTL_GPU);

	/* Core: every subset of the four sources, distinct values: the
	 * highest present one decides. */
	static const uint32_t val[4] = {70, 40, 20, 90};
	static const enum nvs_limit_from from[4] = {NVS_LIMIT_FROM_HELLO, NVS_LIMIT_FROM_ANNOTATION,
						    NVS_LIMIT_FROM_CTL, NVS_LIMIT_FROM_CTL_GPU};
	unsigned bad = 0;
	for (unsigned set = 0; set < 16; set++) {
		struct nvs_limit_sources t = none();
		if (set & 1)
			t.hello_core = val[0];
		if (set & 2)
			t.annot_core = val[1];
		if (set & 4)
			t.ctl_core = val[2];
		if (set & 8)
			t.gpu_core = val[3];
		uint32_t want = 100;
		enum nvs_limit_from wf = NVS_LIMIT_FROM_DEFAULT;
		for (int k = 3; k >= 0; k--)
			if (set & (1u << k)) {
				want = val[k];
				wf = from[k];
				break;
			}
		struct nvs_limits l = nvs_limits_resolve(&t);
		if (l.core != want || l.core_from != wf) {
			bad++;
			printf("# sources %#x: core %u, want %u\n", set, l.core, want);
		}
	}
	tap(!bad, "core: of any subset of HELLO, annotation, ctl, ctl -g, the highest decides");

	/* The claim after a restart only tightens. */
	s = none();
	s.annot_core = 40;
	s.has_annot_mem = 1;
	s.annot_mem = 2 * GI;
	s.has_claim = 1;
	s.claim_core = 30;
	s.claim_mem = 4 * GI;
	expect("a claim stricter in core, looser in memory: core tightened only", &s, 30,
	       NVS_LIMIT_FROM_CLAIM, 2 * GI, NVS_LIMIT_FROM_ANNOTATION);

	/* The binding's ceiling caps every source, nvsharectl included. */
	s = none();
	s.ceil_core = 30;
	s.ceil_mem = 2 * GI;
	expect("a ceiling and nothing else: the ceiling", &s, 30, NVS_LIMIT_FROM_CEILING, 2 * GI,
	       NVS_LIMIT_FROM_CEILING);
	s.gpu_core = 50;
	s.has_gpu_mem = 1;
	s.gpu_mem = NONE;
	expect("ctl -g N above the ceiling: capped", &s, 30, NVS_LIMIT_FROM_CEILING, 2 * GI,
	       NVS_LIMIT_FROM_CEILING);
	s.gpu_core = 10;
	s.gpu_mem = 1 * GI;
	expect("below the ceiling: the source's value", &s, 10, NVS_LIMIT_FROM_CTL_GPU, 1 * GI,
	       NVS_LIMIT_FROM_CTL_GPU);
	return tap_failed ? 1 : 0;
}
