/*
 * The Pod watch's configuration (struct nvs_k8s_config): rows of the
 * settings table (settings.def) fill it at start. Built in every scheduler,
 * with or without the watch itself (k8s_watch.c, or k8s_off.c when built
 * with K8S=0), so both read the same settings.
 */
#include "k8s_watch.h"

struct nvs_k8s_config nvs_k8s_cfg;
