"""The papers the app leans on: one bibliography, cited by key from every topic.

A page that rests a claim on a paper cites it with `cite(key)` ("Wu & He 2018"),
and the home page lists them all (`markdown_list`), so a student can check any
sentence against its source.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """One paper: who, when, what, where, and its arXiv identifier."""

    key: str
    authors: str  # as cited in the text: "Wu & He", "Xiong et al."
    full_authors: str  # every author, for the list
    year: int
    title: str
    venue: str
    arxiv: str  # "1502.03167"

    @property
    def short(self) -> str:
        """How the text cites it: "Wu & He 2018"."""
        return f"{self.authors} {self.year}"

    @property
    def url(self) -> str:
        return f"https://arxiv.org/abs/{self.arxiv}"


SOURCES: dict[str, Source] = {
    s.key: s
    for s in (
        Source(
            "ioffe2015",
            "Ioffe & Szegedy",
            "Sergey Ioffe, Christian Szegedy",
            2015,
            "Batch Normalization: Accelerating Deep Network Training by Reducing Internal "
            "Covariate Shift",
            "ICML 2015",
            "1502.03167",
        ),
        Source(
            "ba2016",
            "Ba et al.",
            "Jimmy Lei Ba, Jamie Ryan Kiros, Geoffrey E. Hinton",
            2016,
            "Layer Normalization",
            "arXiv preprint",
            "1607.06450",
        ),
        Source(
            "ulyanov2016",
            "Ulyanov et al.",
            "Dmitry Ulyanov, Andrea Vedaldi, Victor Lempitsky",
            2016,
            "Instance Normalization: The Missing Ingredient for Fast Stylization",
            "arXiv preprint",
            "1607.08022",
        ),
        Source(
            "he2016",
            "He et al.",
            "Kaiming He, Xiangyu Zhang, Shaoqing Ren, Jian Sun",
            2016,
            "Identity Mappings in Deep Residual Networks",
            "ECCV 2016",
            "1603.05027",
        ),
        Source(
            "li2016",
            "Li et al.",
            "Yanghao Li, Naiyan Wang, Jianping Shi, Jiaying Liu, Xiaodi Hou",
            2016,
            "Revisiting Batch Normalization For Practical Domain Adaptation",
            "arXiv preprint",
            "1603.04779",
        ),
        Source(
            "he2017",
            "He et al.",
            "Kaiming He, Georgia Gkioxari, Piotr Dollár, Ross Girshick",
            2017,
            "Mask R-CNN",
            "ICCV 2017",
            "1703.06870",
        ),
        Source(
            "hoffer2017",
            "Hoffer et al.",
            "Elad Hoffer, Itay Hubara, Daniel Soudry",
            2017,
            "Train longer, generalize better: closing the generalization gap in large batch "
            "training of neural networks",
            "NeurIPS 2017",
            "1705.08741",
        ),
        Source(
            "ioffe2017",
            "Ioffe",
            "Sergey Ioffe",
            2017,
            "Batch Renormalization: Towards Reducing Minibatch Dependence in Batch-Normalized "
            "Models",
            "NeurIPS 2017",
            "1702.03275",
        ),
        Source(
            "wu2018",
            "Wu & He",
            "Yuxin Wu, Kaiming He",
            2018,
            "Group Normalization",
            "ECCV 2018",
            "1803.08494",
        ),
        Source(
            "santurkar2018",
            "Santurkar et al.",
            "Shibani Santurkar, Dimitris Tsipras, Andrew Ilyas, Aleksander Madry",
            2018,
            "How Does Batch Normalization Help Optimization?",
            "NeurIPS 2018",
            "1805.11604",
        ),
        Source(
            "yang2019",
            "Yang et al.",
            "Greg Yang, Jeffrey Pennington, Vinay Rao, Jascha Sohl-Dickstein, Samuel S. Schoenholz",
            2019,
            "A Mean Field Theory of Batch Normalization",
            "ICLR 2019",
            "1902.08129",
        ),
        Source(
            "zhang2019",
            "Zhang & Sennrich",
            "Biao Zhang, Rico Sennrich",
            2019,
            "Root Mean Square Layer Normalization",
            "NeurIPS 2019",
            "1910.07467",
        ),
        Source(
            "xiong2020",
            "Xiong et al.",
            "Ruibin Xiong, Yunchang Yang, Di He, Kai Zheng, Shuxin Zheng, Chen Xing, "
            "Huishuai Zhang, Yanyan Lan, Liwei Wang, Tie-Yan Liu",
            2020,
            "On Layer Normalization in the Transformer Architecture",
            "ICML 2020",
            "2002.04745",
        ),
        Source(
            "schneider2020",
            "Schneider et al.",
            "Steffen Schneider, Evgenia Rusak, Luisa Eck, Oliver Bringmann, Wieland Brendel, "
            "Matthias Bethge",
            2020,
            "Improving Robustness against Common Corruptions by Covariate Shift Adaptation",
            "NeurIPS 2020",
            "2006.16971",
        ),
        Source(
            "wu2021",
            "Wu & Johnson",
            "Yuxin Wu, Justin Johnson",
            2021,
            'Rethinking "Batch" in BatchNorm',
            "arXiv preprint",
            "2105.07576",
        ),
        Source(
            "wang2022",
            "Wang et al.",
            "Hongyu Wang, Shuming Ma, Li Dong, Shaohan Huang, Dongdong Zhang, Furu Wei",
            2022,
            "DeepNet: Scaling Transformers to 1,000 Layers",
            "arXiv preprint (IEEE TPAMI 2024)",
            "2203.00555",
        ),
        Source(
            "sun2024",
            "Sun et al.",
            "Mingjie Sun, Xinlei Chen, J. Zico Kolter, Zhuang Liu",
            2024,
            "Massive Activations in Large Language Models",
            "COLM 2024",
            "2402.17762",
        ),
        Source(
            "kim2025",
            "Kim et al.",
            "Jeonghoon Kim, Byeongchan Lee, Cheonbok Park, Yeontaek Oh, Beomjun Kim, "
            "Taehwan Yoo, Seongjin Shin, Dongyoon Han, Jinwoo Shin, Kang Min Yoo",
            2025,
            "Peri-LN: Revisiting Normalization Layer in the Transformer Architecture",
            "ICML 2025",
            "2502.02732",
        ),
        Source(
            "zhu2025",
            "Zhu et al.",
            "Jiachen Zhu, Xinlei Chen, Kaiming He, Yann LeCun, Zhuang Liu",
            2025,
            "Transformers without Normalization",
            "CVPR 2025",
            "2503.10622",
        ),
        Source(
            "qiao2019",
            "Qiao et al.",
            "Siyuan Qiao, Huiyu Wang, Chenxi Liu, Wei Shen, Alan Yuille",
            2019,
            "Micro-Batch Training with Batch-Channel Normalization and Weight Standardization",
            "arXiv preprint",
            "1903.10520",
        ),
        Source(
            "sun2025",
            "Sun et al.",
            "Wenfang Sun, Xinyuan Song, Pengxiang Li, Lu Yin, Yefeng Zheng, Shiwei Liu",
            2025,
            "The Curse of Depth in Large Language Models",
            "arXiv preprint",
            "2502.05795",
        ),
        Source(
            "verma2026",
            "Verma",
            "Lucky Verma",
            2026,
            "When Does Removing LayerNorm Help? Activation Bounding as a Regime-Dependent "
            "Implicit Regularizer",
            "arXiv preprint",
            "2604.23434",
        ),
    )
}


def cite(key: str) -> str:
    """The in-text citation of `key`: "Wu & He 2018".

    Raises:
        KeyError: no such source (a citation must point into the bibliography).
    """
    return SOURCES[key].short


def entry(s: Source) -> str:
    """One bibliography line, markdown: authors (year). *Title*. Venue. arXiv link."""
    return f"{s.full_authors} ({s.year}). *{s.title}*. {s.venue}. [arXiv:{s.arxiv}]({s.url})"


def markdown_list() -> str:
    """Every source, one bullet each, in the order above (by year)."""
    return "\n".join(f"- {entry(s)}" for s in SOURCES.values())
