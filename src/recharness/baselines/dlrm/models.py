"""RecBench's nine deep CTR models (§4, Group A) over the fields [user_id,] history, item_id.

Every model maps a batch {field: LongTensor} to click probabilities [B]. The user is the mean of
the embeddings of their history items (Eq. 2; the history shares the item table), the item its
embedding; `make_model` puts a text or semantic item encoder (Groups B, C) in place of the item
table for any of them.

torch-rechub 0.9.0 ships four of the nine, used as they are: DeepFM, DCN, AutoInt (AutoInt+: with
its MLP) and DCNv2 (full-rank, parallel). One fix: torch-rechub's `CrossNetV2` computes
x0 * (W x) + b + x, with the bias outside the Hadamard product, where DCNv2's Eq. (1) is
x_{l+1} = x0 * (W x_l + b) + x_l; DCNv2 here gets `GatedCrossNetwork(gated=False)`, which is that
equation. (Its low-rank mixture `CrossNetMix` is not used: it squeezes the batch axis of a batch of
one, and RecBench times single predictions.)

The other five are composed from torch-rechub layers (EmbeddingLayer, MLP, LR) and checked against
their papers' equations in tests/test_dlrm.py:

- DNN: MLP over the concatenated field embeddings.
- PNN (Qu et al. 2016, IPNN): MLP over [embeddings; pairwise inner products <e_i, e_j>, i < j].
- MaskNet (Wang et al. 2021): MaskBlocks V_out = ReLU(LN(W_h (V_mask * V_in))), instance-guided
  mask V_mask = W_2 ReLU(W_1 V_emb + b_1) + b_2, V_in = LN_EMB(V_emb) (field-wise layer norm) for a
  block on the embeddings or the previous block's output (serial); parallel blocks feed an MLP.
- FinalMLP (Mao et al. 2023): two MLP streams, each on the embeddings gated by its feature selection
  2 * sigmoid(MLP(context)) (stream 1: the user side, stream 2: the item), fused by multi-head
  bilinear fusion sum_h [b + w1.o1_h + w2.o2_h + o1_h^T W3_h o2_h].
- GDCN (Wang et al. 2023): gated cross layers c_{l+1} = c0 * (W c_l + b) * sigmoid(W_g c_l + b_g) + c_l,
  in parallel with an MLP (GDCN-P) or stacked under it (GDCN-S).
"""

from __future__ import annotations

import torch
from torch import nn
from torch_rechub.basic.features import SequenceFeature, SparseFeature
from torch_rechub.basic.initializers import Pretrained, RandomNormal
from torch_rechub.basic.layers import LR, MLP, EmbeddingLayer
from torch_rechub.models.ranking import DCN, AutoInt, DCNv2, DeepFM

from recharness.baselines.dlrm.features import PAD, FeatureSpace

MODELS = ("dnn", "pnn", "deepfm", "dcn", "dcnv2", "masknet", "finalmlp", "autoint", "gdcn")


# ---------------------------------------------------------------- input fields

def field_features(space: FeatureSpace, init_std: float = 1e-4) -> list:
    """Fresh torch-rechub feature objects for the space's fields (they cache their tables, so one set per model)."""
    init = RandomNormal(0.0, init_std)
    d = space.embed_dim
    fields = []
    if space.use_user:
        fields.append(SparseFeature("user_id", len(space.users), d, padding_idx=PAD, initializer=init))
    fields.append(SequenceFeature("history", len(space.items), d, pooling="mean", shared_with="item_id",
                                  padding_idx=PAD, initializer=init))
    fields.append(SparseFeature("item_id", len(space.items), d, padding_idx=PAD, initializer=init))
    return fields


class ContentEmbedding(nn.Module):
    """EmbeddingLayer's interface (x, features, squeeze_dim) -> [B, F, D] for an item represented by
    its content: `text`, the mean of its title's word embeddings (a torch-rechub mean-pooled
    SequenceFeature over the tokens); `semantic`, its frozen pretrained vector (torch-rechub
    `Pretrained`, frozen) through a learned linear map to D. History = masked mean of its items."""

    def __init__(self, space: FeatureSpace, init_std: float = 1e-4):
        super().__init__()
        d = space.embed_dim
        self.representation = space.representation
        init = RandomNormal(0.0, init_std)
        self.users = (SparseFeature("user_id", len(space.users), d, padding_idx=PAD, initializer=init)
                      .get_embedding_layer() if space.use_user else None)
        if self.representation == "text":
            self.register_buffer("item_tokens", torch.as_tensor(space.item_tokens, dtype=torch.long))
            self.title = SequenceFeature("title", len(space.words), d, pooling="mean", padding_idx=PAD, initializer=init)
            self.words = EmbeddingLayer([self.title])
        elif self.representation == "semantic":
            vec = torch.as_tensor(space.item_vectors, dtype=torch.float32)
            self.vectors = Pretrained(vec, freeze=True)(vec.shape[0], vec.shape[1], padding_idx=PAD)
            self.project = nn.Linear(vec.shape[1], d)
        else:
            raise ValueError(f"ContentEmbedding is for text or semantic items, not {self.representation!r}")
        self._table: torch.Tensor | None = None
        self.register_load_state_dict_post_hook(lambda module, keys: module._forget())

    def _forget(self) -> None:
        self._table = None

    def train(self, mode: bool = True):
        self._forget()
        return super().train(mode)

    def item_table(self) -> torch.Tensor:
        """[items, D]: every item row's vector (cached while evaluating: prediction is a gather)."""
        if self._table is not None and not self.training:
            return self._table
        if self.representation == "text":
            table = self.words({"title": self.item_tokens}, [self.title], squeeze_dim=True)
        else:
            table = self.project(self.vectors.weight)
        table = table * (torch.arange(table.shape[0], device=table.device) != PAD).unsqueeze(1)
        if not self.training:
            self._table = table.detach()
        return table

    def forward(self, x: dict, features: list, squeeze_dim: bool = False) -> torch.Tensor:
        table = self.item_table()
        out = []
        for fea in features:
            if fea.name == "user_id":
                out.append(self.users(x["user_id"].long()))
            elif fea.name == "item_id":
                out.append(table[x["item_id"].long()])
            elif fea.name == "history":
                idx = x["history"].long()
                mask = (idx != PAD).unsqueeze(-1).float()
                out.append((table[idx] * mask).sum(1) / (mask.sum(1) + 1e-16))
            else:
                raise KeyError(f"no field {fea.name!r}")
        emb = torch.stack(out, dim=1)
        return emb.flatten(start_dim=1) if squeeze_dim else emb


def input_embedding(space: FeatureSpace, fields: list, init_std: float = 1e-4) -> nn.Module:
    return EmbeddingLayer(fields) if space.representation == "id" else ContentEmbedding(space, init_std)


def _prob(logit: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(logit.squeeze(1))


def _mlp_params(dims, dropout) -> dict:
    return {"dims": list(dims), "dropout": dropout, "activation": "relu"}


# ---------------------------------------------------------------- composed models

class DNN(nn.Module):
    def __init__(self, fields: list, embedding: nn.Module, embed_dim: int, mlp_dims=(256, 128), dropout=0.0):
        super().__init__()
        self.features, self.embedding = fields, embedding
        self.mlp = MLP(len(fields) * embed_dim, output_layer=True, **_mlp_params(mlp_dims, dropout))

    def forward(self, x):
        return _prob(self.mlp(self.embedding(x, self.features, squeeze_dim=True)))


class InnerProduct(nn.Module):
    """PNN's inner-product layer: [B, F, D] -> [B, F(F-1)/2], p_ij = <e_i, e_j> for i < j (row-major)."""

    def forward(self, emb: torch.Tensor) -> torch.Tensor:
        i, j = torch.triu_indices(emb.shape[1], emb.shape[1], offset=1, device=emb.device)
        return (emb[:, i] * emb[:, j]).sum(-1)


class PNN(nn.Module):
    """IPNN: the first hidden layer sees z (the embeddings) and p (their inner products)."""

    def __init__(self, fields: list, embedding: nn.Module, embed_dim: int, mlp_dims=(256, 128), dropout=0.0):
        super().__init__()
        self.features, self.embedding = fields, embedding
        n = len(fields)
        self.product = InnerProduct()
        self.mlp = MLP(n * embed_dim + n * (n - 1) // 2, output_layer=True, **_mlp_params(mlp_dims, dropout))

    def forward(self, x):
        emb = self.embedding(x, self.features)
        return _prob(self.mlp(torch.cat([emb.flatten(start_dim=1), self.product(emb)], dim=1)))


class InstanceMask(nn.Module):
    """V_mask = W2 ReLU(W1 V_emb + b1) + b2 (aggregation layer `reduction_ratio` times wider than the output)."""

    def __init__(self, emb_dim: int, out_dim: int, reduction_ratio: float = 1.0):
        super().__init__()
        hidden = max(1, round(out_dim * reduction_ratio))
        self.aggregate = nn.Linear(emb_dim, hidden)
        self.project = nn.Linear(hidden, out_dim)

    def forward(self, v_emb):
        return self.project(torch.relu(self.aggregate(v_emb)))


class MaskBlock(nn.Module):
    """V_out = ReLU(LN(W_h (V_mask(V_emb) * V_in))), W_h without bias (LN has one)."""

    def __init__(self, emb_dim: int, in_dim: int, out_dim: int, reduction_ratio: float = 1.0, dropout: float = 0.0):
        super().__init__()
        self.mask = InstanceMask(emb_dim, in_dim, reduction_ratio)
        self.hidden = nn.Linear(in_dim, out_dim, bias=False)
        self.norm = nn.LayerNorm(out_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, v_emb, v_in):
        return self.dropout(torch.relu(self.norm(self.hidden(self.mask(v_emb) * v_in))))


class MaskNet(nn.Module):
    def __init__(self, fields: list, embedding: nn.Module, embed_dim: int, mlp_dims=(256, 128), dropout=0.0,
                 mode: str = "parallel", num_blocks: int = 2, block_dim: int = 64, reduction_ratio: float = 1.0):
        super().__init__()
        if mode not in ("parallel", "serial"):
            raise ValueError(f"MaskNet mode is parallel or serial, not {mode!r}")
        self.features, self.embedding, self.mode = fields, embedding, mode
        n, e = len(fields), len(fields) * embed_dim
        self.field_norm = nn.ModuleList(nn.LayerNorm(embed_dim) for _ in range(n))
        ins = [e] * num_blocks if mode == "parallel" else [e] + [block_dim] * (num_blocks - 1)
        self.blocks = nn.ModuleList(MaskBlock(e, i, block_dim, reduction_ratio, dropout) for i in ins)
        if mode == "parallel":
            self.head = MLP(num_blocks * block_dim, output_layer=True, **_mlp_params(mlp_dims, dropout))
        else:
            self.head = LR(block_dim)

    def layer_norm_emb(self, emb):
        """LN_EMB: each field's embedding normalised on its own, then flattened."""
        return torch.cat([norm(emb[:, k]) for k, norm in enumerate(self.field_norm)], dim=1)

    def forward(self, x):
        emb = self.embedding(x, self.features)
        v_emb, v_in = emb.flatten(start_dim=1), self.layer_norm_emb(emb)
        if self.mode == "parallel":
            h = torch.cat([block(v_emb, v_in) for block in self.blocks], dim=1)
        else:
            h = v_in
            for block in self.blocks:
                h = block(v_emb, h)
        return _prob(self.head(h))


class FeatureGate(nn.Module):
    """FinalMLP feature selection: 2 * sigmoid(MLP(context)) over the flat embedding (a learned bias as
    context when there is none)."""

    def __init__(self, ctx_dim: int | None, out_dim: int, hidden: int = 64, bias_dim: int = 16):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(1, bias_dim)) if ctx_dim is None else None
        self.mlp = nn.Sequential(nn.Linear(ctx_dim or bias_dim, hidden), nn.ReLU(), nn.Linear(hidden, out_dim))

    def forward(self, ctx, batch: int):
        if self.bias is not None:
            ctx = self.bias.expand(batch, -1)
        return 2.0 * torch.sigmoid(self.mlp(ctx))


class BilinearFusion(nn.Module):
    """sum over heads h of [b + w1.o1_h + w2.o2_h + o1_h^T W3_h o2_h]: a logit [B, 1]."""

    def __init__(self, dim1: int, dim2: int, num_heads: int = 1):
        super().__init__()
        if dim1 % num_heads or dim2 % num_heads:
            raise ValueError(f"FinalMLP fusion: stream widths {dim1}, {dim2} must divide by {num_heads} heads")
        self.num_heads = num_heads
        self.w1 = nn.Linear(dim1, 1)  # carries b (the heads' biases summed)
        self.w2 = nn.Linear(dim2, 1, bias=False)
        self.w12 = nn.Parameter(torch.empty(num_heads, dim1 // num_heads, dim2 // num_heads))
        nn.init.xavier_normal_(self.w12)

    def forward(self, o1, o2):
        h1 = o1.view(o1.shape[0], self.num_heads, -1)
        h2 = o2.view(o2.shape[0], self.num_heads, -1)
        bilinear = torch.einsum("bhi,hij,bhj->b", h1, self.w12, h2).unsqueeze(1)
        return self.w1(o1) + self.w2(o2) + bilinear


class FinalMLP(nn.Module):
    def __init__(self, fields: list, embedding: nn.Module, embed_dim: int, mlp_dims=(256, 128), dropout=0.0,
                 mlp2_dims=(256,), num_heads: int = 1, feature_selection: bool = True, fs_hidden: int = 64):
        super().__init__()
        self.features, self.embedding = fields, embedding
        n, e = len(fields), len(fields) * embed_dim
        self.embed_dim = embed_dim
        self.feature_selection = feature_selection
        if feature_selection:
            self.gate1 = FeatureGate((n - 1) * embed_dim, e, fs_hidden)  # the user side: [user_id,] history
            self.gate2 = FeatureGate(embed_dim, e, fs_hidden)  # the item
        self.mlp1 = MLP(e, output_layer=False, **_mlp_params(mlp_dims, dropout))
        self.mlp2 = MLP(e, output_layer=False, **_mlp_params(mlp2_dims, dropout))
        self.fusion = BilinearFusion(list(mlp_dims)[-1], list(mlp2_dims)[-1], num_heads)

    def streams(self, emb):
        flat = emb.flatten(start_dim=1)
        if not self.feature_selection:
            return flat, flat
        user, item = emb[:, :-1].flatten(start_dim=1), emb[:, -1]
        return flat * self.gate1(user, flat.shape[0]), flat * self.gate2(item, flat.shape[0])

    def forward(self, x):
        x1, x2 = self.streams(self.embedding(x, self.features))
        return _prob(self.fusion(self.mlp1(x1), self.mlp2(x2)))


class GatedCrossNetwork(nn.Module):
    """c_{l+1} = c0 * (W_l c_l + b_l) * sigmoid(W_g,l c_l + b_g,l) + c_l; without the gate, DCNv2's
    cross layer x_{l+1} = x0 * (W_l x_l + b_l) + x_l."""

    def __init__(self, input_dim: int, num_layers: int, gated: bool = True):
        super().__init__()
        self.w = nn.ModuleList(nn.Linear(input_dim, input_dim) for _ in range(num_layers))
        self.gate = nn.ModuleList(nn.Linear(input_dim, input_dim) for _ in range(num_layers)) if gated else None

    def forward(self, c0):
        c = c0
        for k, w in enumerate(self.w):
            cross = c0 * w(c)
            if self.gate is not None:
                cross = cross * torch.sigmoid(self.gate[k](c))
            c = cross + c
        return c


class GDCN(nn.Module):
    def __init__(self, fields: list, embedding: nn.Module, embed_dim: int, mlp_dims=(256, 128), dropout=0.0,
                 n_cross_layers: int = 3, structure: str = "parallel"):
        super().__init__()
        if structure not in ("parallel", "stacked"):
            raise ValueError(f"GDCN structure is parallel or stacked, not {structure!r}")
        self.features, self.embedding, self.structure = fields, embedding, structure
        e = len(fields) * embed_dim
        self.cross = GatedCrossNetwork(e, n_cross_layers)
        self.mlp = MLP(e, output_layer=False, **_mlp_params(mlp_dims, dropout))
        self.linear = LR(e + list(mlp_dims)[-1] if structure == "parallel" else list(mlp_dims)[-1])

    def forward(self, x):
        emb = self.embedding(x, self.features, squeeze_dim=True)
        cross = self.cross(emb)
        h = torch.cat([cross, self.mlp(emb)], dim=1) if self.structure == "parallel" else self.mlp(cross)
        return _prob(self.linear(h))


# ---------------------------------------------------------------- factory

def _swap_embedding(model: nn.Module, embedding: nn.Module) -> nn.Module:
    """Put a content item encoder where a torch-rechub model keeps its EmbeddingLayer."""
    for name, child in list(model.named_children()):
        if isinstance(child, EmbeddingLayer):
            setattr(model, name, embedding)
    return model


def make_model(name: str, space: FeatureSpace, *, mlp_dims=(256, 128), dropout: float = 0.0,
               init_std: float = 1e-4, **params) -> nn.Module:
    """One of `MODELS` over the space's fields; `params` are the model's own (n_cross_layers, ...)."""
    d = space.embed_dim
    fields = field_features(space, init_std)
    mlp = _mlp_params(mlp_dims, dropout)
    if name in ("deepfm", "dcn", "dcnv2", "autoint"):
        if name == "deepfm":
            model = DeepFM(fields, fields, mlp)
        elif name == "dcn":
            model = DCN(fields, params.pop("n_cross_layers", 3), mlp)
        elif name == "dcnv2":
            n_cross = params.pop("n_cross_layers", 3)
            model = DCNv2(fields, n_cross, mlp, model_structure=params.pop("structure", "parallel"),
                          use_low_rank_mixture=False)
            model.crossnet = GatedCrossNetwork(model.dims, n_cross, gated=False)
        else:
            model = AutoInt(fields, None, num_layers=params.pop("num_layers", 3), num_heads=params.pop("num_heads", 2),
                            dropout=params.pop("attention_dropout", 0.0), mlp_params=mlp)
        if params:
            raise TypeError(f"{name} takes no parameters {sorted(params)}")
        return model if space.representation == "id" else _swap_embedding(model, ContentEmbedding(space, init_std))
    composed = {"dnn": DNN, "pnn": PNN, "masknet": MaskNet, "finalmlp": FinalMLP, "gdcn": GDCN}
    if name not in composed:
        raise ValueError(f"unknown DLRM {name!r}; known: {', '.join(MODELS)}")
    return composed[name](fields, input_embedding(space, fields, init_std), d, mlp_dims, dropout, **params)
