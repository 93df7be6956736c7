/*
 * What a client's tenant is (pinned at connect by peer.c, never from the
 * client): the core keeps it in struct client and fairness.c takes turns
 * by it.
 */
#ifndef NVSHARE_SCHEDULER_CORE_TENANT_H
#define NVSHARE_SCHEDULER_CORE_TENANT_H

enum nvs_tenant_kind {
	NVS_TENANT_UNKNOWN = 0,
	NVS_TENANT_UID = 1, /* no Pod: the host uid is the tenant */
	NVS_TENANT_POD = 2,
};

enum nvs_id_source {
	NVS_ID_NONE = 0,
	NVS_ID_CGROUP = 1,	/* the connecting process's own cgroup */
	NVS_ID_PID_HISTORY = 2, /* unknown now; its pid was last seen in this Pod */
	NVS_ID_SOCKET = 3,	/* it connected on its Pod's own socket (podsock.h) */
};

#endif
