// node: what one node of a CG graph costs, computed from its shapes — the
// kernel config of nn-Meter (input and output H, W, C, kernel size, stride,
// input channels per group, FLOPs, bytes moved). Shared by the kernel-level
// model (its forests' features, kernel.c) and the GNN (log FLOPs and log
// bytes as node inputs, data.c), so the two count costs the same way.
#ifndef CGQ_PRED_NODE_H
#define CGQ_PRED_NODE_H

// The numbers per node: in_h, in_w, in_c, out_h, out_w, out_c, kernel,
// stride, cin_per_group, flops, bytes.
#define CGQ_PRED_NODE_FEATS 11
#define CGQ_PRED_NODE_FLOPS 9  // index of the FLOPs
#define CGQ_PRED_NODE_BYTES 10 // index of the bytes moved

// cgq_pred_node_config turns one node's CGQ_CG_NUM_FEATS numbers (op code,
// then the 16 shape numbers, cg/README.md) into CGQ_PRED_NODE_FEATS numbers.
// FLOPs: conv and depthwise conv 2·Ho·Wo·Cout·(Cin/g)·k², fc 2·in·out, pools
// out·k², batchnorm 2·out, activations and add out, global pool in; bytes:
// 4 × (input elements (both operands for add) + output elements + weights).
void cgq_pred_node_config (const double *raw, double *out);

#endif
