/* The client registry's core side (registry.h). */
#include "registry.h"

#include "claims.h"
#include "fairness.h"
#include "policy.h"
#include "state.h"

void nvs_core_client_add(struct client *cl)
{
	cl->next = S.clients;
	if (S.clients)
		S.clients->prev = cl;
	S.clients = cl;
	S.nclients++;
	nvs_fair_join(cl); /* its tenant: turns on the GPUs (fairness.h) */
}

void nvs_core_gpu_detach(struct client_gpu *cg, uint64_t now)
{
	nvs_policy_detach(cg, now);
	nvs_claims_forget(cg);
}

void nvs_core_client_remove(struct client *cl)
{
	if (cl->prev)
		cl->prev->next = cl->next;
	else
		S.clients = cl->next;
	if (cl->next)
		cl->next->prev = cl->prev;
	S.nclients--;
	nvs_fair_leave(cl);
}
