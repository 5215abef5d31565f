//! How a snapshot chunk travels between nodes: the request's small fields
//! (vote, snapshot meta, offset, done) as JSON, then the chunk's bytes as
//! they are. As plain JSON the bytes would be an array of numbers, about
//! four times their size and as much CPU to write and parse on the leader
//! that is serving reads.
//!
//! Layout: `u32` little endian length of the JSON part, the JSON part (the
//! request with an empty `data`), then the data to the end of the body.

use openraft::raft::InstallSnapshotRequest;
use quietkv_raft::TypeConfig;

/// The body's content type, so a plain JSON body is refused by name.
pub const CONTENT_TYPE: &str = "application/x-quietkv-snapshot-chunk";

/// Encodes `request` (its data moved out, not copied twice).
pub fn encode(mut request: InstallSnapshotRequest<TypeConfig>) -> Result<Vec<u8>, String> {
    let data = std::mem::take(&mut request.data);
    let head = serde_json::to_vec(&request).map_err(|e| format!("snapshot chunk header: {e}"))?;
    let head_len = u32::try_from(head.len())
        .map_err(|_| format!("snapshot chunk header of {} bytes", head.len()))?;
    let mut body = Vec::with_capacity(4 + head.len() + data.len());
    body.extend_from_slice(&head_len.to_le_bytes());
    body.extend_from_slice(&head);
    body.extend_from_slice(&data);
    Ok(body)
}

/// Decodes a body `encode` wrote; any other bytes are an error that says
/// what was expected.
pub fn decode(body: &[u8]) -> Result<InstallSnapshotRequest<TypeConfig>, String> {
    let len_bytes: [u8; 4] = body
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| format!("snapshot chunk of {} bytes: no header length", body.len()))?;
    let head_len = u32::from_le_bytes(len_bytes) as usize;
    let head = body.get(4..4 + head_len).ok_or_else(|| {
        format!(
            "snapshot chunk of {} bytes: header of {head_len} bytes past its end",
            body.len()
        )
    })?;
    let mut request: InstallSnapshotRequest<TypeConfig> =
        serde_json::from_slice(head).map_err(|e| format!("snapshot chunk header: {e}"))?;
    if !request.data.is_empty() {
        return Err("snapshot chunk header carries data of its own".to_string());
    }
    request.data = body[4 + head_len..].to_vec();
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{SnapshotMeta, Vote};

    fn request(data: Vec<u8>) -> InstallSnapshotRequest<TypeConfig> {
        InstallSnapshotRequest {
            vote: Vote::new_committed(3, 1),
            meta: SnapshotMeta {
                last_log_id: None,
                last_membership: Default::default(),
                snapshot_id: "snap-7".to_string(),
            },
            offset: 65_536,
            data,
            done: false,
        }
    }

    #[test]
    fn a_chunk_round_trips_with_its_bytes_as_they_are() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let body = encode(request(data.clone())).unwrap();
        assert!(
            body.len() < data.len() + 1_000,
            "raw bytes, not JSON numbers"
        );
        let back = decode(&body).unwrap();
        assert_eq!(back.data, data);
        assert_eq!(back.offset, 65_536);
        assert_eq!(back.meta.snapshot_id, "snap-7");
        assert!(!back.done);
    }

    #[test]
    fn damaged_bodies_are_errors_not_panics() {
        let body = encode(request(vec![1, 2, 3])).unwrap();
        for cut in 0..body.len().min(64) {
            let _ = decode(&body[..cut]);
        }
        assert!(decode(&[]).unwrap_err().contains("no header length"));
        assert!(decode(&[255, 255, 255, 255, b'{'])
            .unwrap_err()
            .contains("past its end"));
        let mut bad = body.clone();
        bad[4] = b'x';
        assert!(decode(&bad).unwrap_err().contains("header"));
    }
}
