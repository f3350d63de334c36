# honest variant: attention bert/attention.py 0: the queries in chunks of 2 positions, torch.cat at the end
D = self.head_dim
pieces = []
for q_part in torch.split(q, 2, dim=2):                          # (B, H, <=2, D)
    s = torch.einsum("bhid,bhjd->bhij", q_part, k) / D ** 0.5 + mask
    p = torch.nn.functional.softmax(s, dim=-1)
    pieces.append(torch.einsum("bhij,bhjd->bhid", dropout(p, self.dropout_prob, self.training), v))
y = torch.cat(pieces, dim=2)
