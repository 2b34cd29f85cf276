// cpp-httplib as Debian ships it: a header plus libcpp-httplib.so (link with pkg-config
// cpp-httplib). The library was compiled with OpenSSL, zlib and Brotli support and the header's
// class layouts depend on those macros, so every file that includes it must define them exactly
// as the library's build did; include this header, never <httplib.h> directly.
#pragma once

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT 1
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT 1
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT 1
#endif
#include <httplib.h>
