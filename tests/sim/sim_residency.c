/*
 * Simulated GPU: where managed memory is (sim_memory.h has the model), and
 * the device memory accounting that competes with it: a device allocation
 * reserves its bytes here because making room for it evicts managed pages.
 *
 * A page's local record names its slot; the slot names its owner (pid,
 * allocation id, page), so a page another process evicted is seen as back
 * on the host without telling us.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim_memory.h"

/* ---- residency (sim_mu and the shared lock held) ---- */

static uint64_t page_bytes(const struct sim_alloc *a, uint32_t i)
{
	uint64_t off = (uint64_t)i * SIM_PAGE;
	return a->size - off < SIM_PAGE ? a->size - off : SIM_PAGE;
}

/* GPU the page is resident on, or -1. Drops stale records (evicted). */
static int page_loc(struct sim_alloc *a, uint32_t i)
{
	int32_t s = a->slot[i];
	if (s < 0)
		return -1;
	int d = a->pdev[i];
	struct sim_slot *sl = &sim_slots(d)[s];
	if (sl->pid == (int32_t)getpid() && sl->alloc_id == a->id && sl->page == i)
		return d;
	a->slot[i] = -1;
	return -1;
}

static void slot_free(int dev, uint32_t s)
{
	struct sim_slot *sl = &sim_slots(dev)[s];
	if (!sl->pid)
		return;
	sim_sh->gpu[dev].resident -= sl->bytes;
	struct sim_proc *p = sim_proc_find_locked(sl->pid);
	if (p)
		p->resident[dev] -= sl->bytes;
	memset(sl, 0, sizeof(*sl));
}

/* Evicts one slot: counted for the GPU and for the owner. Returns bytes. */
static uint64_t evict_slot(int dev, uint32_t s)
{
	struct sim_slot *sl = &sim_slots(dev)[s];
	uint64_t b = sl->bytes;
	struct sim_proc *owner = sim_proc_find_locked(sl->pid);
	sim_sh->gpu[dev].c.evictions++;
	sim_sh->gpu[dev].c.evicted_bytes += b;
	if (owner) {
		owner->c[dev].evictions++;
		owner->c[dev].evicted_bytes += b;
	}
	slot_free(dev, s);
	return b;
}

/* LRU candidates of one GPU, oldest first, excluding [x0, x1) of alloc xid. */
struct lru {
	uint32_t *idx;
	uint32_t n, pos;
	int dev;
	int built;
};

static struct sim_slot *cmp_slots;
static int cmp_lru(const void *x, const void *y)
{
	uint64_t a = cmp_slots[*(const uint32_t *)x].last_use;
	uint64_t b = cmp_slots[*(const uint32_t *)y].last_use;
	return a < b ? -1 : a > b;
}

static void lru_build(struct lru *l, int dev, uint64_t xid, uint32_t x0, uint32_t x1)
{
	struct sim_gpu *g = &sim_sh->gpu[dev];
	struct sim_slot *s = sim_slots(dev);
	free(l->idx);
	l->idx = malloc(sizeof(uint32_t) * (g->nslots ? g->nslots : 1));
	l->n = l->pos = 0;
	l->dev = dev;
	l->built = 1;
	if (!l->idx)
		return;
	for (uint32_t i = 0; i < g->nslots; i++) {
		if (!s[i].pid)
			continue;
		if (s[i].alloc_id == xid && s[i].page >= x0 && s[i].page < x1)
			continue;
		l->idx[l->n++] = i;
	}
	cmp_slots = s; /* sim_mu is held: no concurrent sort in this process */
	qsort(l->idx, l->n, sizeof(uint32_t), cmp_lru);
}

/* Makes room for `need` more bytes on dev. Returns bytes evicted; *ok
 * says whether it now fits. */
static uint64_t make_room(int dev, uint64_t need, struct lru *l, uint64_t xid, uint32_t x0,
			  uint32_t x1, int *ok)
{
	struct sim_gpu *g = &sim_sh->gpu[dev];
	uint64_t ev = 0;
	for (;;) {
		uint64_t inuse = sim_gpu_used_locked(dev) + g->resident;
		if (inuse + need <= g->total) {
			*ok = 1;
			return ev;
		}
		if (!l->built)
			lru_build(l, dev, xid, x0, x1);
		while (l->pos < l->n && !sim_slots(dev)[l->idx[l->pos]].pid)
			l->pos++;
		if (l->pos >= l->n) {
			*ok = 0;
			return ev;
		}
		ev += evict_slot(dev, l->idx[l->pos++]);
	}
}

static int slot_alloc(int dev)
{
	struct sim_gpu *g = &sim_sh->gpu[dev];
	struct sim_slot *s = sim_slots(dev);
	for (uint32_t k = 0; k < g->nslots; k++) {
		uint32_t i = (g->slot_hint + k) % g->nslots;
		if (!s[i].pid) {
			g->slot_hint = i + 1;
			return (int)i;
		}
	}
	return -1;
}

uint64_t sim_migrate(uint64_t ptr, uint64_t bytes, int dst, uint64_t start, int kind,
		     uint64_t *moved_out)
{
	uint64_t moved = 0, evicted = 0, peer = 0;
	int from_dev = -1;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked(ptr);
	if (!a || a->kind != A_MANAGED || !bytes) {
		pthread_mutex_unlock(&sim_mu);
		if (moved_out)
			*moved_out = 0;
		return start;
	}
	uint64_t end_addr = ptr + bytes > a->base + a->size ? a->base + a->size : ptr + bytes;
	uint32_t p0 = (uint32_t)((ptr - a->base) / SIM_PAGE);
	uint32_t p1 = (uint32_t)((end_addr - a->base + SIM_PAGE - 1) / SIM_PAGE);
	struct lru l = {0};
	uint32_t own = p0; /* fallback victims: this range's pages, oldest first */
	sim_lock();
	struct sim_proc *me = sim_self_locked();
	uint64_t now = sim_now();
	int stray = 0;
	for (uint32_t i = p0; i < p1; i++) {
		int cur = page_loc(a, i);
		uint64_t pb = page_bytes(a, i);
		if (a->disc[i]) {
			/* A kernel reading a discarded page before anything
			 * defined it again reads an indeterminate value; a
			 * prefetch defines it (cuMemDiscardBatchAsync). */
			stray |= kind == 1;
			a->disc[i] = 0;
		}
		if (kind == 2 && cur == -1 && dst >= 0) {
			/* Discard-and-prefetch: the page is populated on the
			 * GPU without moving anything. */
		} else if (cur == dst) {
			if (cur >= 0)
				sim_slots(cur)[a->slot[i]].last_use = now;
			continue;
		}
		if (dst >= 0) {
			int ok;
			evicted += make_room(dst, pb, &l, a->id, p0, p1, &ok);
			while (!ok && own < i) {
				/* The range itself is larger than the GPU:
				 * its earliest pages make way (as UVM would). */
				int oc = page_loc(a, own);
				if (oc == dst) {
					evicted += evict_slot(dst, (uint32_t)a->slot[own]);
					a->slot[own] = -1;
				}
				own++;
				evicted += make_room(dst, pb, &l, a->id, p0, p1, &ok);
			}
			if (!ok)
				break;
		}
		if (cur >= 0) {
			slot_free(cur, (uint32_t)a->slot[i]);
			a->slot[i] = -1;
			from_dev = cur;
			if (dst >= 0)
				peer += pb;
		}
		if (dst >= 0) {
			int s = slot_alloc(dst);
			if (s < 0)
				break;
			struct sim_slot *sl = &sim_slots(dst)[s];
			sl->pid = (int32_t)getpid();
			sl->alloc_id = a->id;
			sl->page = i;
			sl->bytes = pb;
			sl->last_use = now;
			a->slot[i] = s;
			a->pdev[i] = (int8_t)dst;
			sim_sh->gpu[dst].resident += pb;
			me->resident[dst] += pb;
		}
		if (kind != 2)
			moved += pb;
	}
	free(l.idx);
	if (stray)
		sim_count_stray_locked(dst >= 0 ? dst : 0);

	/* Time: evictions are written back first, then the pages move. */
	uint64_t ev_ns = sim_xfer_ns(evicted, sim_cfg.d2h_bps);
	uint64_t mv_ns;
	if (kind == 2)
		mv_ns = 0;
	else if (dst < 0)
		mv_ns = sim_xfer_ns(moved, sim_cfg.d2h_bps);
	else if (kind == 1)
		mv_ns = sim_xfer_ns(moved, sim_cfg.fault_bps);
	else
		mv_ns = sim_xfer_ns(moved, sim_cfg.h2d_bps);
	int cdev = dst >= 0 ? dst : from_dev;
	if (cdev >= 0) {
		struct sim_counters *cs[2] = {&sim_sh->gpu[cdev].c, &me->c[cdev]};
		for (int k = 0; k < 2; k++) {
			struct sim_counters *c = cs[k];
			c->evict_ns += ev_ns;
			if (kind == 2) {
				/* nothing moved */
			} else if (kind == 1) {
				c->fault_bytes += moved;
				c->fault_ns += mv_ns;
			} else if (dst >= 0) {
				c->prefetch_h2d_bytes += moved;
				c->prefetch_h2d_ns += mv_ns;
			} else {
				c->prefetch_d2h_bytes += moved;
				c->prefetch_d2h_ns += mv_ns;
			}
		}
	}
	(void)peer;
	sim_unlock();
	pthread_mutex_unlock(&sim_mu);
	if (moved_out)
		*moved_out = moved;
	return start + ev_ns + mv_ns;
}

void sim_touch(uint64_t ptr, uint64_t bytes, int dev)
{
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked(ptr);
	if (a && a->kind == A_MANAGED && bytes) {
		uint64_t e = ptr + bytes > a->base + a->size ? a->base + a->size : ptr + bytes;
		uint64_t now = sim_now();
		sim_lock();
		for (uint32_t i = (uint32_t)((ptr - a->base) / SIM_PAGE);
		     i < (uint32_t)((e - a->base + SIM_PAGE - 1) / SIM_PAGE); i++)
			if (page_loc(a, i) == dev)
				sim_slots(dev)[a->slot[i]].last_use = now;
		sim_unlock();
	}
	pthread_mutex_unlock(&sim_mu);
}

CUresult sim_gpu_access(uint64_t ptr, uint64_t bytes, int dev, int write)
{
	if (!bytes)
		return CUDA_SUCCESS;
	CUresult r = CUDA_SUCCESS;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked(ptr);
	if (a && a->kind == A_VA) {
		uint64_t e = ptr + bytes > a->base + a->size ? a->base + a->size : ptr + bytes;
		if (!sim_vmm_accessible(a, ptr, e - ptr, dev)) {
			r = CUDA_ERROR_ILLEGAL_ADDRESS;
			sim_lock();
			sim_count_stray_locked(dev >= 0 ? dev : (a->dev >= 0 ? a->dev : 0));
			sim_unlock();
		}
	} else if (a && a->kind == A_MANAGED) {
		uint64_t e = ptr + bytes > a->base + a->size ? a->base + a->size : ptr + bytes;
		int stray = 0;
		for (uint32_t i = (uint32_t)((ptr - a->base) / SIM_PAGE);
		     i < (uint32_t)((e - a->base + SIM_PAGE - 1) / SIM_PAGE); i++)
			if (a->disc[i]) {
				stray |= !write;
				a->disc[i] = 0;
			}
		if (stray) {
			sim_lock();
			sim_count_stray_locked(dev >= 0 ? dev : 0);
			sim_unlock();
		}
	}
	pthread_mutex_unlock(&sim_mu);
	return r;
}

int nvshareSimTouch(uint64_t ptr, uint64_t bytes)
{
	sim_state_init();
	int dev = sim_cur_dev();
	if (dev < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	return (int)sim_gpu_access(ptr, bytes, dev, 0);
}

int nvshareSimPageLocation(uint64_t ptr)
{
	sim_state_init();
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked(ptr);
	int r = -2;
	if (a && a->kind == A_MANAGED) {
		sim_lock();
		r = page_loc(a, (uint32_t)((ptr - a->base) / SIM_PAGE));
		sim_unlock();
	}
	pthread_mutex_unlock(&sim_mu);
	return r;
}

void sim_count_stray_locked(int dev)
{
	if (dev < 0 || (uint32_t)dev >= sim_sh->ngpus)
		return;
	sim_sh->gpu[dev].c.stray_accesses++;
	sim_self_locked()->c[dev].stray_accesses++;
	sim_log("stray access dev=%d (a discarded page read, or an unmapped VMM range)", dev);
}

void sim_discard_locked(struct sim_alloc *a, uint64_t p, uint64_t n)
{
	uint64_t e = p + n > a->base + a->size ? a->base + a->size : p + n;
	if (p >= e)
		return;
	uint32_t p0 = (uint32_t)((p - a->base) / SIM_PAGE);
	uint32_t p1 = (uint32_t)((e - a->base + SIM_PAGE - 1) / SIM_PAGE);
	int dev = sim_cur_dev();
	sim_lock();
	for (uint32_t i = p0; i < p1; i++) {
		int d = page_loc(a, i);
		if (d >= 0) { /* dropped, not written back */
			slot_free(d, (uint32_t)a->slot[i]);
			a->slot[i] = -1;
		}
		a->disc[i] = 1;
	}
	if (dev >= 0) {
		sim_sh->gpu[dev].c.discard_bytes += e - p;
		sim_self_locked()->c[dev].discard_bytes += e - p;
	}
	sim_unlock();
	/* The bytes are gone: poison at the start of every 4 KiB page and at
	 * both ends, so a range that is read back without being restored
	 * fails any data check (cheap, and no page faults later, as a copy
	 * into the range would take after MADV_DONTNEED). */
	static const uint64_t poison = SIM_DISCARD_POISON;
	for (uint64_t q = (p + 4095) & ~4095ull; q + 8 <= e; q += 4096)
		memcpy(DP(q), &poison, 8);
	memcpy(DP(p), &poison, e - p < 8 ? e - p : 8);
	if (e - p >= 8)
		memcpy(DP(e - 8), &poison, 8);
}

void sim_release_pages(struct sim_alloc *a)
{
	if (a->kind != A_MANAGED)
		return;
	sim_lock();
	for (uint32_t i = 0; i < a->npages; i++) {
		int d = page_loc(a, i);
		if (d >= 0)
			slot_free(d, (uint32_t)a->slot[i]);
	}
	sim_unlock();
}

/* ---- device memory accounting ---- */

int sim_mem_reserve(int dev, uint64_t bytes)
{
	struct lru l = {0};
	int ok;
	sim_lock();
	uint64_t ev = make_room(dev, bytes, &l, 0, 0, 0, &ok);
	if (ev) {
		sim_sh->gpu[dev].c.evict_ns += sim_xfer_ns(ev, sim_cfg.d2h_bps);
	}
	if (ok)
		sim_self_locked()->used[dev] += bytes;
	sim_unlock();
	free(l.idx);
	return ok ? 0 : -1;
}

void sim_mem_unreserve(int dev, uint64_t bytes)
{
	sim_lock();
	struct sim_proc *p = sim_self_locked();
	p->used[dev] = p->used[dev] >= bytes ? p->used[dev] - bytes : 0;
	sim_unlock();
}
