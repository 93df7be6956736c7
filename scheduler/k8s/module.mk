# scheduler/k8s/: Kubernetes, behind k8s_watch.h (start, stop, look a Pod
# up, on-change callback) and pod_identity.h (a client's Pod). Included by
# scheduler/module.mk. The settings (k8s_config.c) and the Pod identity of
# clients (pod_identity.c, from the cgroup and the watch's cache) are in
# every build. The Pod watch (libcurl, its own thread) and its JSON are
# left out with K8S=0: k8s_off.c instead (never on; refuses to start when
# asked for), and no -lcurl. cJSON stays either way: the status view
# (status_json.c) and the state file are JSON.
K8S_SRCS := scheduler/k8s/k8s_config.c scheduler/k8s/pod_identity.c
ifeq ($(K8S),0)
K8S_SRCS += scheduler/k8s/k8s_off.c
K8S_LIBS :=
else
K8S_SRCS += scheduler/k8s/k8s_watch.c scheduler/k8s/k8s_json.c scheduler/k8s/k8s_jstream.c \
	scheduler/k8s/annotations.c
K8S_LIBS := -lcurl
endif
