/**
 * The SPIFFE Workload API's messages and service (the SPIFFE "Workload API" and "X509-SVID" /
 * "JWT-SVID" standards), written down as a protobuf.js JSON descriptor so no .proto file has to be
 * shipped next to the compiled code. Field numbers and types follow the public spec; the service has
 * no protobuf package, so its methods live at `/SpiffeWorkloadAPI/<Method>`.
 *
 * `ValidateJWTSVIDResponse.claims` (a google.protobuf.Struct) is left out on purpose: AMF verifies
 * JWT-SVIDs itself against the JWT bundle, and protobuf skips fields a reader does not know.
 */
const repeated = (type: string, id: number) => ({ rule: 'repeated', type, id });
const single = (type: string, id: number) => ({ type, id });
const map = (type: string, id: number) => ({ keyType: 'string', type, id });

export const WORKLOAD_API_SCHEMA = {
  nested: {
    SpiffeWorkloadAPI: {
      methods: {
        FetchX509SVID: {
          requestType: 'X509SVIDRequest',
          responseType: 'X509SVIDResponse',
          responseStream: true,
        },
        FetchX509Bundles: {
          requestType: 'X509BundlesRequest',
          responseType: 'X509BundlesResponse',
          responseStream: true,
        },
        FetchJWTSVID: { requestType: 'JWTSVIDRequest', responseType: 'JWTSVIDResponse' },
        FetchJWTBundles: {
          requestType: 'JWTBundlesRequest',
          responseType: 'JWTBundlesResponse',
          responseStream: true,
        },
        ValidateJWTSVID: { requestType: 'ValidateJWTSVIDRequest', responseType: 'ValidateJWTSVIDResponse' },
      },
    },
    X509SVIDRequest: { fields: {} },
    X509SVIDResponse: {
      fields: {
        svids: repeated('X509SVID', 1),
        crl: repeated('bytes', 2),
        federated_bundles: map('bytes', 3),
      },
    },
    X509SVID: {
      fields: {
        spiffe_id: single('string', 1),
        /** ASN.1 DER certificates, leaf first, concatenated. */
        x509_svid: single('bytes', 2),
        /** PKCS#8 DER private key of the leaf. */
        x509_svid_key: single('bytes', 3),
        /** ASN.1 DER CA certificates of the trust domain, concatenated. */
        bundle: single('bytes', 4),
        hint: single('string', 5),
      },
    },
    X509BundlesRequest: { fields: {} },
    X509BundlesResponse: { fields: { crl: repeated('bytes', 1), bundles: map('bytes', 2) } },
    JWTSVIDRequest: { fields: { audience: repeated('string', 1), spiffe_id: single('string', 2) } },
    JWTSVIDResponse: { fields: { svids: repeated('JWTSVID', 1) } },
    JWTSVID: {
      fields: { spiffe_id: single('string', 1), svid: single('string', 2), hint: single('string', 3) },
    },
    JWTBundlesRequest: { fields: {} },
    /** Trust domain → JWKS document (JSON bytes). */
    JWTBundlesResponse: { fields: { bundles: map('bytes', 1) } },
    ValidateJWTSVIDRequest: { fields: { audience: single('string', 1), svid: single('string', 2) } },
    ValidateJWTSVIDResponse: { fields: { spiffe_id: single('string', 1) } },
  },
};

/** Decoded messages (proto-loader with keepCase, defaults, bytes as Buffer). */
export interface X509SvidMessage {
  spiffe_id: string;
  x509_svid: Buffer;
  x509_svid_key: Buffer;
  bundle: Buffer;
  hint: string;
}
export interface X509SvidResponse {
  svids: X509SvidMessage[];
  federated_bundles: Record<string, Buffer>;
}
export interface X509BundlesResponse {
  bundles: Record<string, Buffer>;
}
export interface JwtSvidResponse {
  svids: { spiffe_id: string; svid: string; hint: string }[];
}
export interface JwtBundlesResponse {
  bundles: Record<string, Buffer>;
}
export interface ValidateJwtSvidResponse {
  spiffe_id: string;
}
