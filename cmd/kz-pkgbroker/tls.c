/*
 * The upstreams' TLS (OpenSSL under libevent's bufferevent_openssl).  One
 * client context for the broker's life: TLS 1.2 or later, the peer's
 * chain verified against the system's trust store or, when
 * PKGBROKER_UPSTREAM_CA is set, against that file's anchors alone.  Each
 * connection sends the upstream's host name as SNI (not for an address
 * literal, which SNI may not carry) and checks the certificate is for that
 * name or address.  What went wrong in a failed handshake is noted as it
 * happens, by the verify and info callbacks, because libevent resets the
 * SSL object (SSL_clear) before it tells the fetch that the connection
 * failed; the fetch then answers with one of the reasons below.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "serve.h"
#include "banned.h"

static int
verify_cb(int ok, X509_STORE_CTX *xs)
{
	SSL *ssl = X509_STORE_CTX_get_ex_data(xs,
	    SSL_get_ex_data_X509_STORE_CTX_idx());
	struct pb_tls *t = ssl == NULL ? NULL : SSL_get_app_data(ssl);

	if (!ok && t != NULL && t->verr == 0)
		t->verr = X509_STORE_CTX_get_error(xs);
	return ok;
}

static void
info_cb(const SSL *ssl, int where, int ret)
{
	struct pb_tls *t = SSL_get_app_data(ssl);
	BIO *rb = SSL_get_rbio(ssl);

	if (t == NULL)
		return;
	if (where & SSL_CB_HANDSHAKE_START)
		t->started = true;
	if (where & SSL_CB_HANDSHAKE_DONE)
		t->done = true;
	if (rb != NULL && BIO_number_read(rb) > t->nread)
		t->nread = BIO_number_read(rb);
	/* A fatal error leaves its reason on the queue as SSL_connect
	 * returns; libevent takes it off afterwards. */
	if ((where & SSL_CB_EXIT) && ret <= 0 && t->err == 0)
		t->err = ERR_peek_last_error();
}

static int
ctx_build(const char *ca_file, SSL_CTX **out, char *why, size_t wlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	int r = KZ_ECONF;

	if (ctx == NULL) {
		kz_why(why, wlen, "cannot make a TLS context");
		return KZ_ENOMEM;
	}
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
		kz_why(why, wlen, "cannot require TLS 1.2");
		goto out;
	}
	if (ca_file != NULL && ca_file[0] != '\0') {
		if (SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
			kz_why(why, wlen,
			    "PKGBROKER_UPSTREAM_CA is not a readable PEM file "
			    "of certificates");
			goto out;
		}
	} else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
		kz_why(why, wlen, "the system's trust store cannot be loaded");
		goto out;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, verify_cb);
	SSL_CTX_set_info_callback(ctx, info_cb);
	*out = ctx;
	ctx = NULL;
	r = 0;
out:
	/* What OpenSSL queued about the file is not left for a fetch. */
	ERR_clear_error();
	SSL_CTX_free(ctx);
	return r;
}

int
pb_tls_check(const char *ca_file, char *why, size_t wlen)
{
	SSL_CTX *ctx = NULL;
	int r;

	if ((r = ctx_build(ca_file, &ctx, why, wlen)) != 0)
		return r;
	SSL_CTX_free(ctx);
	return 0;
}

int
pb_tls_ctx_new(const char *ca_file, SSL_CTX **out, char *why, size_t wlen)
{
	return ctx_build(ca_file, out, why, wlen);
}

SSL *
pb_tls_new(SSL_CTX *ctx, const struct pb_upstream *up, struct pb_tls *t)
{
	unsigned char addr[sizeof(struct in6_addr)];
	bool literal = inet_pton(AF_INET, up->host, addr) == 1 ||
	    inet_pton(AF_INET6, up->host, addr) == 1;
	SSL *ssl = SSL_new(ctx);

	memset(t, 0, sizeof(*t));
	if (ssl == NULL)
		return NULL;
	SSL_set_app_data(ssl, t);
	if (literal) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl),
		        up->host) != 1)
			goto fail;
		return ssl;
	}
	if (SSL_set_tlsext_host_name(ssl, up->host) != 1 ||
	    SSL_set1_host(ssl, up->host) != 1)
		goto fail;
	SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	return ssl;
fail:
	SSL_free(ssl);
	return NULL;
}

/* The peer's first bytes were not a TLS record. */
static bool
not_tls(unsigned long e)
{
	int r = ERR_GET_REASON(e);

	return ERR_GET_LIB(e) == ERR_LIB_SSL &&
	    (r == SSL_R_WRONG_VERSION_NUMBER || r == SSL_R_HTTP_REQUEST ||
	        r == SSL_R_HTTPS_PROXY_REQUEST ||
	        r == SSL_R_PACKET_LENGTH_TOO_LONG ||
	        r == SSL_R_RECORD_LENGTH_MISMATCH);
}

bool
pb_tls_failure(const struct pb_tls *t, const char **code, const char **text)
{
	switch (t->verr) {
	case X509_V_OK:
		break;
	case X509_V_ERR_HOSTNAME_MISMATCH:
	case X509_V_ERR_IP_ADDRESS_MISMATCH:
		*code = "upstream_tls_name";
		*text = "the upstream's certificate is not for its host name";
		return true;
	case X509_V_ERR_CERT_HAS_EXPIRED:
	case X509_V_ERR_CERT_NOT_YET_VALID:
		*code = "upstream_tls_expired";
		*text = "the upstream's certificate has expired or is not "
		        "yet valid";
		return true;
	default:
		*code = "upstream_tls_untrusted";
		*text = "the upstream's certificate is not trusted";
		return true;
	}
	/* Nothing came back, or the handshake was over: not TLS's doing. */
	if (!t->started || t->done || t->nread == 0)
		return false;
	if (not_tls(t->err)) {
		*code = "upstream_not_tls";
		*text = "the upstream did not answer in TLS";
	} else {
		*code = "upstream_tls_handshake";
		*text = "the TLS handshake with the upstream failed";
	}
	return true;
}
