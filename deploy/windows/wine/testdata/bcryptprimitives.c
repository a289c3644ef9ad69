/*
 * A stand-in for Windows' bcryptprimitives.dll, for running Go programs
 * under Wine 8, which does not ship the DLL. Go's runtime (1.24 and later)
 * loads bcryptprimitives.dll from the system directory at start and calls
 * ProcessPrng for every random byte it needs; without it the runtime
 * throws "bcryptprimitives.dll not found" before main.
 *
 * ProcessPrng fills the buffer from RtlGenRandom (advapi32's
 * SystemFunction036), which Wine implements over the host's random source.
 * It is a test aid (the Wine smoke test builds it with mingw-w64), never
 * shipped: real Windows 10 and later have the real DLL.
 *
 *   x86_64-w64-mingw32-gcc -shared -O2 -o bcryptprimitives.dll bcryptprimitives.c
 */
#include <windows.h>

typedef BOOLEAN(WINAPI *rtl_gen_random)(PVOID buf, ULONG len);

static rtl_gen_random gen;

BOOL WINAPI DllMain(HINSTANCE dll, DWORD reason, LPVOID reserved)
{
	(void)dll;
	(void)reserved;
	if (reason == DLL_PROCESS_ATTACH) {
		HMODULE advapi = LoadLibraryA("advapi32.dll");
		if (advapi == NULL)
			return FALSE;
		gen = (rtl_gen_random)(void *)GetProcAddress(advapi, "SystemFunction036");
		if (gen == NULL)
			return FALSE;
	}
	return TRUE;
}

/* ProcessPrng has the real DLL's signature; it returns TRUE on success. */
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
	while (len > 0) {
		ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
		if (!gen(data, n))
			return FALSE;
		data += n;
		len -= n;
	}
	return TRUE;
}
