"""Test certificates (the `cryptography` package, in e2e/.venv): CAs, serving
and client certificates written as PEM files."""
import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


class Issued:
    """A certificate, its key and its issuer. `ca` is the issuer's Issued
    (itself for a self-signed CA)."""

    def __init__(self, cert, key, ca=None):
        self.cert, self.key, self.ca = cert, key, ca or self

    @property
    def cert_pem(self):
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self):
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())

    def write(self, directory, stem):
        """Writes STEM.crt and STEM.key; returns their paths."""
        crt, key = Path(directory) / f"{stem}.crt", Path(directory) / f"{stem}.key"
        crt.write_bytes(self.cert_pem)
        key.write_bytes(self.key_pem)
        key.chmod(0o600)
        return crt, key


def _builder(cn, key, issuer_cn, valid_from, valid_for):
    start = datetime.datetime.now(datetime.timezone.utc) + valid_from
    return (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(issuer_cn))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(start + valid_for))


def new_ca(cn, curve=ec.SECP256R1, valid_for=datetime.timedelta(days=1)):
    """A self-signed CA: an ECDSA key on `curve`, valid from five minutes ago
    for `valid_for`."""
    key = ec.generate_private_key(curve())
    cert = (_builder(cn, key, cn, datetime.timedelta(minutes=-5), valid_for)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(key, hashes.SHA256()))
    return Issued(cert, key)


def issue(ca, cn, dns=(), ips=(), client=False, valid_from=datetime.timedelta(minutes=-5),
          valid_for=datetime.timedelta(days=1)):
    """A leaf certificate signed by `ca`: a server certificate for `dns`/`ips`,
    or with client=True a client certificate (CN = the user name)."""
    key = ec.generate_private_key(ec.SECP256R1())
    b = (_builder(cn, key, ca.cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value, valid_from,
                  valid_for)
         .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
         .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client
                                               else ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
    sans = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return Issued(b.sign(ca.key, hashes.SHA256()), key, ca)
