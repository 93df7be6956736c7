/* Preloaded after libnvshare.so: RTLD_NEXT lookups from here must resolve
 * relative to this library, not to libnvshare (where our dlsym lives). */
#include <dlfcn.h>
int nvs_next_target(void);
int nvs_next_target(void)
{
	return 1;
} /* this library's own: must be skipped */
void *nvs_next_lookup(const char *name);
void *nvs_next_lookup(const char *name)
{
	void *r = dlsym(RTLD_NEXT, name);
	__asm__ volatile("" : : "r"(r) : "memory"); /* no tail call: we are the caller */
	return r;
}
