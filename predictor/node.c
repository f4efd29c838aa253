#include "node.h"

#include "graph.h"

// s_shape reads a shape of the features: "1,H,W,C,0" (rank 4) or "1,C,0,0,0".
static void
s_shape (const double *s, double *h, double *w, double *c)
{
    if (s[2] == 0 && s[3] == 0) {
        *h = *w = 1;
        *c = s[1];
    }
    else {
        *h = s[1];
        *w = s[2];
        *c = s[3];
    }
}

void
cgq_pred_node_config (const double *raw, double *out)
{
    int code = (int)raw[0];
    double ih, iw, ic, oh, ow, oc;
    s_shape (raw + 1, &ih, &iw, &ic);
    s_shape (raw + 12, &oh, &ow, &oc);
    double k = raw[6], cin_g = raw[8], cout = raw[9], stride = raw[10];
    double in_el = ih * iw * ic, out_el = oh * ow * oc, flops = 0, weights = 0;
    switch (code) {
    case CGQ_CG_CONV2D:
    case CGQ_CG_CODE_DWCONV2D:
        flops = 2 * oh * ow * cout * cin_g * k * k;
        weights = k * k * cin_g * cout;
        break;
    case CGQ_CG_FC:
        flops = 2 * cin_g * cout;
        weights = cin_g * cout;
        break;
    case CGQ_CG_MAXPOOL:
    case CGQ_CG_AVGPOOL: flops = out_el * k * k; break;
    case CGQ_CG_GLOBAL_AVGPOOL: flops = in_el; break;
    case CGQ_CG_BATCHNORM:
        flops = 2 * out_el;
        weights = 2 * oc;
        break;
    case CGQ_CG_RELU:
    case CGQ_CG_RELU6:
    case CGQ_CG_SIGMOID:
    case CGQ_CG_HSWISH: flops = out_el; break;
    case CGQ_CG_ADD:
        flops = out_el;
        in_el *= 2; // both operands are read
        break;
    case CGQ_CG_CONCAT: in_el = out_el; break; // the features keep only the first input
    default: break;
    }
    double f[CGQ_PRED_NODE_FEATS] = {
        ih, iw, ic, oh, ow, oc, k, stride, cin_g, flops, 4 * (in_el + out_el + weights)};
    for (int i = 0; i < CGQ_PRED_NODE_FEATS; i++)
        out[i] = f[i];
}
