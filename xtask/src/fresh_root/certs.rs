//! The machine's own CA certificates (a registry proxy's, say): those in
//! the host's bundle that the host's ca-certificates package did not
//! bring (its certificates are under /usr/share/ca-certificates). They go
//! into the root the way an administrator adds one, under
//! /usr/local/share/ca-certificates, so every later regeneration of the
//! root's bundle keeps them.

/// The PEM certificate blocks of a bundle, each whole with its markers.
pub fn pem_blocks(bundle: &str) -> Vec<String> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let mut blocks = Vec::new();
    let mut rest = bundle;
    while let Some(start) = rest.find(BEGIN) {
        let Some(len) = rest[start..].find(END) else {
            break;
        };
        let block = &rest[start..start + len + END.len()];
        blocks.push(block.lines().map(str::trim).collect::<Vec<_>>().join("\n") + "\n");
        rest = &rest[start + len + END.len()..];
    }
    blocks
}

/// The certificates of the bundle `host` that none of `packaged` holds,
/// in the bundle's order.
pub fn missing_from(host: &str, packaged: &str) -> Vec<String> {
    let have = pem_blocks(packaged);
    pem_blocks(host)
        .into_iter()
        .filter(|b| !have.contains(b))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(body: &str) -> String {
        format!("-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n")
    }

    #[test]
    fn only_the_machines_own_certificates_are_added() {
        let host = format!(
            "{}{}\n# comment\n{}",
            cert("AAA"),
            cert("PROXY"),
            cert("BBB")
        );
        let root = format!("{}\r\n{}", cert("BBB"), cert("AAA"));
        assert_eq!(missing_from(&host, &root), [cert("PROXY")]);
        assert!(missing_from(&root, &host).is_empty());
        assert_eq!(
            pem_blocks("-----BEGIN CERTIFICATE-----\ntruncated"),
            Vec::<String>::new()
        );
    }
}
