/* ProcessPrng for Wine 8 (Debian 12), which has no bcryptprimitives.dll: Rust's standard library
 * for Windows takes its random bytes (HashMap seeds) from ProcessPrng there, and a program that
 * imports it does not start without the DLL. Windows 10 and later ship it, as do newer Wine
 * releases. This stand-in fills the buffer from RtlGenRandom (advapi32's SystemFunction036),
 * which Wine 8 has; it is only put into the CI's Wine prefix, never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
  while (length > 0) {
    ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
    if (!SystemFunction036(data, chunk)) return FALSE;
    data += chunk;
    length -= chunk;
  }
  return TRUE;
}
