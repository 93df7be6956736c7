/* nvsharectl's human-readable status: the scheduler's JSON as two tables. */
#ifndef NVSHARE_CTL_STATUS_VIEW_H
#define NVSHARE_CTL_STATUS_VIEW_H

#include <stddef.h>
#include <stdio.h>

/* Returns 0, or -1 when the JSON cannot be read (message printed). */
int nvs_status_print(FILE *f, const char *json, size_t len);

#endif
