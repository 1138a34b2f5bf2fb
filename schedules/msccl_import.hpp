#pragma once
// Import of MSCCL-style XML algorithm files (docs/plan-format.md, "MSCCL import"):
//   <algo name coll ngpus nchunksperloop [nchannels proto inplace]>
//     <gpu id [i_chunks o_chunks s_chunks]>
//       <tb id send recv [chan]>
//         <step s type srcbuf srcoff dstbuf dstoff cnt [depid deps hasdep]/>
// Step types: s (send), r (recv), rcs (recv, then send what arrived), rrc (recv, reduce into
// dst), rrs and rrcs (recv, reduce into dst, send dst), cpy (copy), nop. Buffers i, o, s;
// offsets and counts are in chunks of size / nchunksperloop bytes.
//
// A threadblock becomes two streams of its GPU's rank: one for its sends, one for everything
// else, because a send into a connection's FIFO does not hold up the threadblock. The n-th
// send from GPU a to GPU b on a channel matches the n-th receive of b from a on that channel.
// The XML is read by a small reader written for this format: elements, attributes, comments
// and the XML declaration; errors name the line.
#include <string>
#include <string_view>

#include "schedules/plan.hpp"

namespace collsim::sched {

Plan import_msccl(const std::string& path, Bytes size, DType dtype = DType::fp32);
Plan parse_msccl(std::string_view text, const std::string& file, Bytes size,
                 DType dtype = DType::fp32);

}  // namespace collsim::sched
