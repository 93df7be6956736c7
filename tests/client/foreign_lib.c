/* A library with cu-prefixed names that are not the driver's. */
int cudnnCreate(void **h);
int cudnnCreate(void **h)
{
	if (h)
		*h = 0;
	return 0;
}
void *curl_easy_init(void);
void *curl_easy_init(void)
{
	return 0;
}
int cuda_like_helper(void);
int cuda_like_helper(void)
{
	return 42;
}
