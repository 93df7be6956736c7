/* nvsharectl's human-readable status: the scheduler's JSON as two tables. */
#ifndef NVSHARE_CTL_STATUS_VIEW_H
#define NVSHARE_CTL_STATUS_VIEW_H

#include <stddef.h>
#include <stdio.h>

/* Returns 0, or -1 when the JSON cannot be read (message printed). */
int nvs_status_print(FILE *f, const char *json, size_t len);
/* nvsharectl --settings: every setting's value and source, then the GPUs
 * with their own mode, TQ or capacity (json: the "settings" object as
 * JSON). The same return. */
int nvs_settings_print(FILE *f, const char *json, size_t len, int as_json);

#endif
