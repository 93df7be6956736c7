/* Linked into the test program: the definition RTLD_NEXT must find. */
int nvs_next_target(void);
int nvs_next_target(void)
{
	return 2;
}
