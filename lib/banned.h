/*
 * Functions that are easy to misuse turn into compile errors.  Include this
 * last, after every system header, in each .c file of the tree.
 */
#ifndef KZ_BANNED_H
#define KZ_BANNED_H

#define KZ_BANNED(func) sorry_##func##_is_a_banned_function

#undef strcpy
#define strcpy(x, y) KZ_BANNED(strcpy)
#undef strcat
#define strcat(x, y) KZ_BANNED(strcat)
#undef strncpy
#define strncpy(x, y, n) KZ_BANNED(strncpy)
#undef strncat
#define strncat(x, y, n) KZ_BANNED(strncat)
#undef sprintf
#define sprintf(...) KZ_BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) KZ_BANNED(vsprintf)
#undef strtok
#define strtok(x, y) KZ_BANNED(strtok)
#undef gets
#define gets(x) KZ_BANNED(gets)
#undef atoi
#define atoi(x) KZ_BANNED(atoi)
#undef atol
#define atol(x) KZ_BANNED(atol)
#undef atoll
#define atoll(x) KZ_BANNED(atoll)
#undef atof
#define atof(x) KZ_BANNED(atof)
#undef gmtime
#define gmtime(x) KZ_BANNED(gmtime)
#undef localtime
#define localtime(x) KZ_BANNED(localtime)
#undef ctime
#define ctime(x) KZ_BANNED(ctime)
#undef asctime
#define asctime(x) KZ_BANNED(asctime)
#undef tmpnam
#define tmpnam(x) KZ_BANNED(tmpnam)
#undef mktemp
#define mktemp(x) KZ_BANNED(mktemp)

#endif
