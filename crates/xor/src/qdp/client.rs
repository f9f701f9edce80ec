//! The QDP client: seed requests, queries made from server-chosen seeds, decoding.

use super::*;

/// What the client keeps between [`QdpClient::query`] and [`QdpClient::decode`].
#[derive(Clone, PartialEq, Eq)]
pub struct QdpState {
    indices: Vec<usize>,
}

impl std::fmt::Debug for QdpState {
    // The indices are the one secret of the protocol; keep them out of debug output and logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QdpState").finish_non_exhaustive()
    }
}

/// The client side of QDP for one set of RAID-PIR parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QdpClient {
    raid: RaidPir,
}

impl QdpClient {
    /// A client for `raid`'s parameters.
    pub fn new(raid: RaidPir) -> Self {
        QdpClient { raid }
    }

    /// The RAID-PIR parameters.
    pub fn scheme(&self) -> &RaidPir {
        &self.raid
    }

    /// The seed request body for server `server`.
    pub fn seed_request(&self, server: usize) -> Result<Vec<u8>, Error> {
        self.check_server(server)?;
        Ok(encode_seed_request(&self.raid, server))
    }

    /// Reads server `server`'s seed response, checking that it names this client's parameters
    /// and that server's position.
    pub fn read_seed_response(&self, server: usize, body: &[u8]) -> Result<SeedGrant, Error> {
        self.check_server(server)?;
        let grant = SeedResponse::from_bytes(body, &self.raid)?.grant;
        if grant.server != server {
            return Err(Error::Malformed(format!(
                "seed response names server position {}, expected {server}",
                grant.server
            )));
        }
        Ok(grant)
    }

    /// Step 3: the query of every server for `indices` (one in [`AnswerMode::Single`], up to
    /// `c` in distinct chunks in [`AnswerMode::PerChunk`]) from the grants of all `n` servers,
    /// in server order. No randomness: the servers' seeds are the query's randomness.
    pub fn query(
        &self,
        indices: &[usize],
        grants: &[SeedGrant],
    ) -> Result<(Vec<QdpQuery>, QdpState), Error> {
        self.raid.check_indices(indices)?;
        let n = self.raid.servers();
        if grants.len() != n || grants.iter().enumerate().any(|(s, g)| g.server != s) {
            return Err(Error::InvalidParameter(format!(
                "need one seed grant per server, in server order 0..{n}"
            )));
        }
        for (s, grant) in grants.iter().enumerate() {
            // Two equal seeds would cancel in a flip chunk when r >= 3 and expose the index.
            if grants[..s].iter().any(|other| other.seed == grant.seed) {
                return Err(Error::Malformed(
                    "two servers sent the same QDP seed".into(),
                ));
            }
        }
        let c = self.raid.chunks();
        let mut flips: Vec<BitVec> = (0..c)
            .map(|chunk| BitVec::zeros(self.raid.chunk_len(chunk)))
            .collect();
        for grant in grants {
            let query = RaidQuery {
                server: grant.server,
                seed: grant.seed,
                flips: zero_flips(&self.raid, grant.server),
            };
            let selection = self.raid.selection(&query)?;
            for (chunk, bits) in selection.iter().enumerate() {
                if self.raid.processes(grant.server, chunk) && chunk % n != grant.server {
                    flips[chunk].xor_assign(bits);
                }
            }
        }
        for &index in indices {
            flips[self.raid.chunk_of(index)].flip(index / c);
        }
        let mut queries: Vec<QdpQuery> = grants
            .iter()
            .map(|grant| QdpQuery {
                server: grant.server,
                seed_id: grant.id,
                flips: Vec::new(),
            })
            .collect();
        for (chunk, bits) in flips.into_iter().enumerate() {
            queries[chunk % n].flips.push(bits);
        }
        let state = QdpState {
            indices: indices.to_vec(),
        };
        Ok((queries, state))
    }

    /// Encodes a query body.
    pub fn encode_query(&self, query: &QdpQuery) -> Vec<u8> {
        encode_query(&self.raid, query)
    }

    /// Reads server `server`'s answer body (exact length checked).
    pub fn decode_answer(&self, server: usize, body: &[u8]) -> Result<RaidAnswer, Error> {
        let query = RaidQuery {
            server,
            seed: [0; SEED_LEN],
            flips: Vec::new(),
        };
        self.raid.decode_answer(&query, body)
    }

    /// Combine: the requested blocks, in request order, from the answers of all servers.
    pub fn decode(&self, state: &QdpState, answers: &[RaidAnswer]) -> Result<Vec<Vec<u8>>, Error> {
        let n = self.raid.servers();
        let b = self.raid.shape().block_size();
        if answers.len() != n {
            return Err(Error::WrongLength(format!(
                "expected {n} answers, got {}",
                answers.len()
            )));
        }
        for (server, answer) in answers.iter().enumerate() {
            let blocks = self.raid.answer_body_len(server) / b;
            if answer.blocks.len() != blocks || answer.blocks.iter().any(|x| x.len() != b) {
                return Err(Error::WrongLength(format!(
                    "answer of server {server} does not have {blocks} blocks of {b} bytes"
                )));
            }
        }
        if self.raid.mode() == AnswerMode::Single {
            let mut block = vec![0u8; b];
            for answer in answers {
                pir_kernels::xor_into(&mut block, &answer.blocks[0]);
            }
            return Ok(vec![block]);
        }
        state
            .indices
            .iter()
            .map(|&index| {
                let chunk = self.raid.chunk_of(index);
                let mut block = vec![0u8; b];
                for t in 0..self.raid.redundancy() {
                    let server = (chunk + t) % n;
                    let slot = self
                        .raid
                        .processed_chunks(server)
                        .position(|x| x == chunk)
                        .ok_or_else(|| Error::InvalidParameter("state does not fit".into()))?;
                    pir_kernels::xor_into(&mut block, &answers[server].blocks[slot]);
                }
                Ok(block)
            })
            .collect()
    }

    fn check_server(&self, server: usize) -> Result<(), Error> {
        if server >= self.raid.servers() {
            return Err(Error::InvalidParameter(format!(
                "server position {server} outside the {} servers",
                self.raid.servers()
            )));
        }
        Ok(())
    }
}
